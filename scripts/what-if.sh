#!/usr/bin/env bash
# What-if against reality (issue 31): each schedule at m, m/2 and 2m replayed from an executed 1F1B
# run, then executed and compared, with the machine's drift beside (tools/stagecraft_tools/what_if.py).
# A benchmark: exits 0 whatever the errors. Output in build/out/what-if/.
# Usage: scripts/what-if.sh [RUNS] [SCENARIO] [--schedules A,B] [--set KEY=VALUE]... [--out DIR]
exec "$(dirname "${BASH_SOURCE[0]}")/tool.sh" what_if "$@"
