#!/usr/bin/env bash
# One GEMM kept running on the GPU for tens of seconds, its rate window by window (burst, then the
# rate the power limit leaves), beside the roofline model's rate for it (issue 56, point 6;
# docs/results/moe-published.md, "What the errors say"):
#   1. tools/stagecraft_tools/gemm_sustain.py runs a transformer block's `fc` GEMM ([s, h] x [h, 4h],
#      s 8192 and h 4096 by default) back to back with PyTorch, timing each window between CUDA events
#      and reading the SM clock and the board's power where PyTorch can;
#   2. `stagecraft simulate --explain-json` times the same GEMM on the matching device file;
#   3. a report: burst, sustained and predicted rates, and every window.
# OUT defaults to build/out/gemm-sustain. Writes OUT/gemm-sustain.json (the probe's),
# OUT/gemm-sustain-compare.json and OUT/gemm-sustain.md; prints the report. A measurement, not a
# test: exits 0 whatever the numbers; prints a line starting with SKIPPED and exits 0 without
# PyTorch or a CUDA device.
# Usage: scripts/gemm-sustain.sh [--out DIR] [--json FILE] [--device-file NAME] [--set KEY=VALUE]...
#                               [PROBE ARGS...]
#   --json FILE         report a probe's JSON taken before (no GPU needed)
#   --device-file NAME  the device file to predict with (default: from the GPU's name)
#   --set KEY=VALUE     an override for the prediction (simulate --set)
#   PROBE ARGS          passed to stagecraft_tools.gemm_sustain (--hidden, --seq, --seconds, --window, --dtype)
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/probe_lib.bash"
probe_parse gemm-sustain "$@"
probe_run gemm-sustain gemm_sustain "the sustained GEMM probe"
STAGECRAFT="$sc" "$root/scripts/tool.sh" gemm_sustain report "$json" --out "$out" --device-file "$device" "${sets[@]}"
