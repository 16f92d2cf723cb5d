#!/usr/bin/env bash
# Regenerates the README's picture of the viewer, docs/viewer.png, from the default scenario's
# traces (run ./scripts/run.sh first; needs xvfb-run or a display; tools/stagecraft_tools/screenshot.py).
# Usage: scripts/screenshot.sh [OUT.png] [--traces DIR]
exec "$(dirname "${BASH_SOURCE[0]}")/tool.sh" screenshot "$@"
