#!/usr/bin/env bash
# Issue 32's targets for `stagecraft search`, measured: Table 5's settings, uneven stages, the CPU
# executor, a large search's wall time (tools/stagecraft_tools/search_bench.py). A benchmark: exits
# 0 whatever the numbers. Part 3 measures: run it on a quiet machine.
# Usage: scripts/search-bench.sh [BUDGET_S] [RUNS] [--parts 1234] [--models M,...] [--set K=V]... [--out DIR]
exec "$(dirname "${BASH_SOURCE[0]}")/tool.sh" search_bench "$@"
