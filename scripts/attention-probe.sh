#!/usr/bin/env bash
# A fused causal attention kernel against one GPU at several sequence lengths (issue 56, point 6;
# docs/results/moe-published.md, "2026-12-02: long context, fine-grained recompute and the fused
# attention's tile model"):
#   1. tools/stagecraft_tools/attention_probe.py times PyTorch's scaled_dot_product_attention,
#      causal, bf16, heads of 128, forward and backward, with cuDNN's fused attention (Transformer
#      Engine's on Hopper) and FlashAttention-2, at 4K to 32K tokens by default;
#   2. `stagecraft simulate --explain-json` predicts the block's flash_attention and
#      flash_attention.dX kernels on the matching device file;
#   3. a report: per case and backend the measured and predicted time and rate.
# OUT defaults to build/out/attention-probe. Writes OUT/attention-probe.json (the probe's),
# OUT/attention-probe-compare.json and OUT/attention-probe.md; prints the report. A measurement,
# not a test: exits 0 whatever the numbers; prints a line starting with SKIPPED and exits 0 without
# PyTorch (2.0 or later) or a CUDA device.
# Usage: scripts/attention-probe.sh [--out DIR] [--json FILE] [--device-file NAME] [--set KEY=VALUE]...
#                                  [PROBE ARGS...]
#   --json FILE         report a probe's JSON taken before (no GPU needed)
#   --device-file NAME  the device file to predict with (default: from the GPU's name)
#   --set KEY=VALUE     an override for the prediction (simulate --set)
#   PROBE ARGS          passed to stagecraft_tools.attention_probe (--cases, --head-dim, --reps)
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/probe_lib.bash"
probe_parse attention-probe "$@"
probe_run attention-probe attention_probe "the attention probe"
STAGECRAFT="$sc" "$root/scripts/tool.sh" attention_probe report "$json" --out "$out" --device-file "$device" "${sets[@]}"
