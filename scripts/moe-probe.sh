#!/usr/bin/env bash
# A mixture-of-experts layer's expert GEMMs against one GPU at several rows per expert (issue 56,
# point 6; docs/results/moe-published.md, "What would close the gap"):
#   1. tools/stagecraft_tools/moe_probe.py times the six GEMMs of a SwiGLU expert MLP (Qwen3-235B's:
#      hidden 4096, width 1536) for all experts of a case (16 x 512, 16 x 1024, 8 x 2048 and 4 x 4096
#      rows by default) with PyTorch, one torch.mm per expert and, where it runs, torch._grouped_mm;
#   2. `stagecraft simulate --explain-json` predicts the same GEMMs on the matching device file;
#   3. a report: per case and way the measured and predicted time by pass and the rates.
# OUT defaults to build/out/moe-probe. Writes OUT/moe-probe.json (the probe's),
# OUT/moe-probe-compare.json and OUT/moe-probe.md; prints the report. A measurement, not a test:
# exits 0 whatever the numbers; prints a line starting with SKIPPED and exits 0 without PyTorch or
# a CUDA device.
# Usage: scripts/moe-probe.sh [--out DIR] [--json FILE] [--device-file NAME] [--set KEY=VALUE]...
#                            [PROBE ARGS...]
#   --json FILE         report a probe's JSON taken before (no GPU needed)
#   --device-file NAME  the device file to predict with (default: from the GPU's name)
#   --set KEY=VALUE     an override for the prediction (simulate --set)
#   PROBE ARGS          passed to stagecraft_tools.moe_probe (--cases, --hidden, --ffn, --reps, --dtype)
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/probe_lib.bash"
probe_parse moe-probe "$@"
probe_run moe-probe moe_probe "the MoE probe"
STAGECRAFT="$sc" "$root/scripts/tool.sh" moe_probe report "$json" --out "$out" --device-file "$device" "${sets[@]}"
