#!/usr/bin/env bash
# Runs one of stagecraft's tools (tools/stagecraft_tools/<MODULE>.py, its main()) under the Python
# the stagecraft module is built for; the scripts that remain in scripts/ are this line and a usage.
# Usage: scripts/tool.sh MODULE [ARGS...]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
py="${STAGECRAFT_PYTHON:-/usr/bin/python3}"
[[ -x "$py" ]] || py=python3
(($#)) || { echo "usage: scripts/tool.sh MODULE [ARGS...]" >&2; exit 2; }
module="$1"; shift
PYTHONPATH="$root/tools${PYTHONPATH:+:$PYTHONPATH}" exec "$py" -m "stagecraft_tools.$module" "$@"
