#!/usr/bin/env bash
# Configures and builds stagecraft into build/ (Release with debug info, Ninja).
# Usage: scripts/build.sh [TARGET...]: those targets and what they need (scripts/run.sh builds
# the command-line tool alone, `stagecraft`); none: everything, the tests included.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cmake -S "$root" -B "$root/build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
if (($#)); then
  cmake --build "$root/build" -j"$(nproc)" --target "$@"
else
  cmake --build "$root/build" -j"$(nproc)"
fi
