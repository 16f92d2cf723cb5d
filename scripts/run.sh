#!/usr/bin/env bash
# The main job: install what is missing, build, and simulate the default scenario (every
# schedule), writing the metrics JSON and one trace per schedule under build/out/.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$root/scripts/install-deps.sh"
"$root/scripts/build.sh"
scenario="${1:-$root/scenarios/gpt-1.3b-8xh100.yaml}"
mkdir -p "$root/build/out"
"$root/build/cli/stagecraft" simulate "$scenario" \
  --json "$root/build/out/predicted.json" --trace "$root/build/out/predicted.trace.json"
echo "metrics: build/out/predicted.json; traces: build/out/predicted.trace.<schedule>.json (open in ui.perfetto.dev)"
