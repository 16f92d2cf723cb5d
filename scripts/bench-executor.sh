#!/usr/bin/env bash
# Benchmarks the CPU executor against the ideal pipeline speed-up (1F1B on 2 ranks >= 90% of
# seq x 2 x m/(m+1)) and its overhead per op; --oversubscribed adds 4 ranks on the cores
# (tools/stagecraft_tools/bench_executor.py). A benchmark: exits 0 whatever the ratio.
# Usage: scripts/bench-executor.sh [--oversubscribed] [--steps N] [--repeats R] [--scenario FILE] [--set K=V]... [M ...]
exec "$(dirname "${BASH_SOURCE[0]}")/tool.sh" bench_executor "$@"
