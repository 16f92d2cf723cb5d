#!/usr/bin/env bash
# Asynchronous pipelines judged by time to a target loss (issue 55): every schedule's samples/s,
# peak memory and time to the target, GPipe, 1F1B, PipeDream, 2BW and PipeMare with and without
# each technique, on 2 and 4 CPU ranks (tools/stagecraft_tools/staleness_bench.py). A benchmark:
# exits 0 whatever the numbers. Output in build/out/staleness/ (report.md).
# Usage: scripts/staleness-bench.sh [SCENARIO] [--ranks 2,4] [--steps N] [--variants A,B] [--set KEY=VALUE]... [--out DIR]
exec "$(dirname "${BASH_SOURCE[0]}")/tool.sh" staleness_bench "$@"
