#!/usr/bin/env bash
# The main job: install what is missing, build, and run the default scenario.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$root/scripts/install-deps.sh"
"$root/scripts/build.sh"
sc="$root/build/cli/stagecraft"
for schedule in gpipe 1f1b zb-h1 zb-h2; do
  "$sc" schedule --schedule "$schedule" --ranks 4 --microbatches 8
  echo
done
"$sc" schedule --schedule interleaved --ranks 4 --microbatches 8 --chunks 2
