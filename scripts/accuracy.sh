#!/usr/bin/env bash
# How close predictions come to measurements (issue 11's targets): profile -> simulate -> execute ->
# compare, RUNS times on two shapes of the main CPU scenario, the errors and their split, the
# stash's share, and data parallelism against the pipeline (tools/stagecraft_tools/accuracy.py).
# A benchmark: exits 0 whatever the errors. Output in build/out/accuracy/.
# Usage: scripts/accuracy.sh [RUNS] [--scenario FILE] [--set KEY=VALUE]... [--out DIR]
exec "$(dirname "${BASH_SOURCE[0]}")/tool.sh" accuracy "$@"
