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
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
sc="${STAGECRAFT:-$root/build/cli/stagecraft}"
out="$root/build/out/layer-probe" json="" device=""
probe_args=() sets=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --out) out="${2:?--out DIR}"; shift ;;
    --json) json="${2:?--json FILE}"; shift ;;
    --device-file) device="${2:?--device-file NAME}"; shift ;;
    --set) sets+=(--set "${2:?--set KEY=VALUE}"); shift ;;
    *) probe_args+=("$1") ;;
  esac
  shift
done
[[ -x "$sc" ]] || { echo "layer-probe: missing $sc: run scripts/build.sh first" >&2; exit 1; }
mkdir -p "$out" || exit 1

if [[ -z "$json" ]]; then
  py=""
  for candidate in "${PYTHON:-}" python3 /usr/bin/python3; do
    [[ -n "$candidate" ]] && "$candidate" -c 'import torch' 2>/dev/null && { py="$candidate"; break; }
  done
  if [[ -z "$py" ]]; then
    echo "SKIPPED: the layer probe needs PyTorch (no python3 here imports torch)"
    exit 0
  fi
  json="$out/layer-probe.json"
  rm -f "$json"
  PYTHONPATH="$root/tools${PYTHONPATH:+:$PYTHONPATH}" "$py" -m stagecraft_tools.layer_probe --out "$json" "${probe_args[@]}" |
    tee "$out/layer-probe.log"
  rc=${PIPESTATUS[0]}
  [[ $rc -eq 0 ]] || { echo "layer-probe: the probe failed (exit $rc)" >&2; exit "$rc"; }
  grep -q '^SKIPPED' "$out/layer-probe.log" && exit 0
fi
[[ -s "$json" ]] || { echo "layer-probe: $json: missing or empty" >&2; exit 1; }

"$root/scripts/tool.sh" layer_report "$json" --out "$out" --device-file "$device" "${sets[@]}"
