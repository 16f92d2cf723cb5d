#!/usr/bin/env bash
# scripts/gemm-sustain.sh (with scripts/probe_lib.bash, which it sources), a GEMM kept running against
# the model: a probe's JSON made up here (six windows falling from 700 to 600 TFLOP/s) reported beside
# the model (the script reads simulate --explain-json; its prediction is checked against the same
# block's --explain-json here, and the burst and sustained rates worked by hand); a probe of no
# window, a window without its rate, a GPU with no device file and bad arguments, one line each.
# Without a python3 that imports torch the probe itself says SKIPPED and exits 0.
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/cli_lib.bash"
gs="$root/scripts/gemm-sustain.sh"

fixture() {  # fixture FILE DEVICE
  python3 - "$1" "$2" <<'PY'
import json, sys
path, device = sys.argv[1:]
rates = [700.0, 680.0, 640.0, 620.0, 600.0, 610.0]
windows = [{"t_s": 0.5 * (i + 1), "gemms": 300, "ms": 500.0, "tflops": r, "clock_mhz": 1980.0 - 40 * i,
            "power_w": None if i == 0 else 690.0} for i, r in enumerate(rates)]
json.dump({"device": device, "torch": "made up", "dtype": "bf16", "hidden": 4096, "seq": 8192, "models": windows},
          open(path, "w"))
PY
}

fixture "$tmp/h100.json" "NVIDIA H100 80GB HBM3"
STAGECRAFT="$sc" "$gs" --json "$tmp/h100.json" --out "$tmp/o" >"$tmp/out" 2>"$tmp/err"
checkf "report: exit 0" '[[ $? -eq 0 ]]' "$tmp/err"
check "report: the H100's name picks H100-SXM" 'grep -q "predicted on H100-SXM$" "$tmp/o/gemm-sustain.md"'
# By hand: burst the first window, 700; sustained the median of the last three (620, 600, 610), 610;
# 610 / 700 = 0.871.
check "report: burst, sustained and their ratio by hand" \
  'grep -qE "^\| burst \(the first window\) \| 700 \|" "$tmp/o/gemm-sustain.md" &&
   grep -qE "^\| sustained \(the median of the last half\) \| 610 \|" "$tmp/o/gemm-sustain.md" &&
   grep -q "^Sustained over burst: 0.871.$" "$tmp/o/gemm-sustain.md"'
check "report: every window, a missing reading as -" \
  '[[ $(grep -cE "^\| [0-9.]+ \| [0-9]+ \| [0-9]+ \| ([0-9]+|-) \|$" "$tmp/o/gemm-sustain.md") -eq 6 ]] &&
   grep -qE "^\| 0.5 \| 700 \| 1980 \| - \|$" "$tmp/o/gemm-sustain.md"'
# The prediction is the model's own: the fc GEMM of a one-layer block of hidden 4096 over 8192
# tokens, 2 x 8192 x 16384 x 4096 FLOPs in the time --explain-json gives it.
cat >"$tmp/block.yaml" <<'YAML'
name: same-block
topology: {device: H100-SXM, nodes: 1, devices_per_node: 1, links: []}
model: {transformer: {layers: 1, hidden: 4096, heads: 32, seq: 8192, vocab: 50304, dropout: false}}
pipeline: {schedule: 1f1b, ranks: 1, microbatches: 1, microbatch_size: 1, steps: 1}
training: {optimizer: adam, lr: 0.0001, dtype: bf16}
YAML
"$sc" simulate "$tmp/block.yaml" --explain-json "$tmp/explain.json" >/dev/null 2>"$tmp/err"
checkf "explain of the same block: exit 0" '[[ $? -eq 0 ]]' "$tmp/err"
python3 - "$tmp/explain.json" "$tmp/o/gemm-sustain-compare.json" <<'PY' || fail=1
import json, sys
ex, cmp_ = (json.load(open(p)) for p in sys.argv[1:])
us = next(k["time_us"] for s in ex["sections"] if s["id"] == "block" for k in s["kernels"]
          if (k["pass"], k["name"]) == ("F", "fc"))
want = 2.0 * 8192 * 16384 * 4096 / us / 1e6
ok = abs(cmp_["predicted_tflops"] - want) < 1e-6 * want and cmp_["shape"] == [8192, 16384, 4096] \
    and abs(cmp_["sustained_over_burst"] - 610 / 700) < 1e-12
print("ok" if ok else f"FAIL: predicted {cmp_['predicted_tflops']} against explain's {want}")
sys.exit(0 if ok else 1)
PY
check "report: written whole, no temporaries left" '[[ -s "$tmp/o/gemm-sustain-compare.json" && -z "$(ls "$tmp/o" | grep tmp)" ]]'

# Bad input: one line each, nothing written.
echo '{"device": "NVIDIA H100 80GB HBM3", "dtype": "bf16", "hidden": 4096, "seq": 8192, "models": []}' >"$tmp/none.json"
STAGECRAFT="$sc" "$gs" --json "$tmp/none.json" --out "$tmp/o2" >"$tmp/out" 2>"$tmp/err"
check "a probe of no window: non-zero exit, one line" \
  '[[ $? -ne 0 && $(wc -l <"$tmp/err") -eq 1 ]] && grep -q "the probe timed no model" "$tmp/err" && [[ ! -e "$tmp/o2/gemm-sustain.md" ]]'
python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); del r["models"][2]["tflops"]; json.dump(r, open(sys.argv[2], "w"))' \
  "$tmp/h100.json" "$tmp/norate.json"
STAGECRAFT="$sc" "$gs" --json "$tmp/norate.json" --out "$tmp/o3" >"$tmp/out" 2>"$tmp/err"
check "a window without its rate: non-zero exit, one line" \
  '[[ $? -ne 0 && $(wc -l <"$tmp/err") -eq 1 ]] && grep -q "every window needs its tflops" "$tmp/err"'
fixture "$tmp/other.json" "Some Other GPU"
STAGECRAFT="$sc" "$gs" --json "$tmp/other.json" --out "$tmp/o4" >"$tmp/out" 2>"$tmp/err"
check "a GPU with no device file: non-zero exit, one line" \
  '[[ $? -ne 0 && $(wc -l <"$tmp/err") -eq 1 ]] && grep -q "no device file for .Some Other GPU.: name one with --device-file" "$tmp/err"'
STAGECRAFT="$sc" "$gs" --json "$tmp/other.json" --device-file H200 --out "$tmp/o4" >"$tmp/out" 2>"$tmp/err"
checkf "--device-file names it" '[[ $? -eq 0 ]] && grep -q "predicted on H200$" "$tmp/o4/gemm-sustain.md"' "$tmp/err"
expect_command_error "a window of no time" "--hidden, --seq, --seconds and --window must be positive" 2 \
  env PYTHONPATH="$root/tools" python3 -m stagecraft_tools.gemm_sustain --window 0

# The probe itself: without PyTorch (or a GPU) it says so and exits 0.
py=""
for candidate in python3 /usr/bin/python3; do
  "$candidate" -c 'import torch' 2>/dev/null && { py="$candidate"; break; }
done
if [[ -z "$py" ]]; then
  STAGECRAFT="$sc" "$gs" --out "$tmp/o5" --seconds 1 >"$tmp/out" 2>"$tmp/err"
  checkf "no PyTorch: SKIPPED, exit 0" '[[ $? -eq 0 ]] && grep -q "^SKIPPED: the sustained GEMM probe needs PyTorch" "$tmp/out"' \
    "$tmp/err"
else
  echo "skipped: the no-PyTorch path (a python3 here imports torch)"
fi
exit $fail
