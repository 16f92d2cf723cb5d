#!/usr/bin/env bash
# The roofline model's kernel list against one GPU, kernel by kernel (issue 30, point 6;
# docs/cost-model.md, "What the profile's timers hold"):
#   1. tools/stagecraft_tools/layer_probe.py times one transformer block of each of the Zero Bubble paper's four
#      models (its Table 3 shapes, fp16, dropout 0.1, no FlashAttention) on this machine's GPU
#      with PyTorch, each kernel of the list one timed call (the queue kept full), and each pass
#      whole as Megatron-LM's Timer times it;
#   2. `stagecraft simulate --explain-json` predicts the same block on the matching device file
#      (scenarios/devices: A100-SXM-80GB, H100-SXM, H200, L40S, from the GPU's name);
#   3. a report: per model the measured and predicted F, I and W per layer, B/F and W/F in the
#      paper's split (its runtime defers only the weight GEMMs to W) beside the paper's A100
#      profile, and the kernels the model has most wrong.
# OUT defaults to build/out/layer-probe. Writes OUT/layer-probe.json (the probe's), OUT/layer-probe-compare.json and OUT/layer-probe.md;
# prints the report. A measurement, not a test: exits 0 whatever the numbers; prints a line
# starting with SKIPPED and exits 0 without PyTorch or a CUDA device.
# Usage: scripts/layer-probe.sh [--out DIR] [--json FILE] [--device-file NAME] [--set KEY=VALUE]...
#                              [PROBE ARGS...]
#   --json FILE    compare a probe's JSON taken before (no GPU needed)
#   --device-file NAME  the device file to predict with (default: from the GPU's name)
#   --set KEY=VALUE     an override for the prediction (simulate --set), e.g.
#                       topology.device.memory_kernels={softmax: 0.3}
#   PROBE ARGS     passed to stagecraft_tools.layer_probe (--models, --reps, --dtype, --dropout, --fused)
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/probe_lib.bash"
probe_parse layer-probe "$@"
probe_run layer-probe layer_probe "the layer probe"
"$root/scripts/tool.sh" layer_report "$json" --out "$out" --device-file "$device" "${sets[@]}"
