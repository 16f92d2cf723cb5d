#!/usr/bin/env bash
# scripts/moe-probe.sh (with scripts/probe_lib.bash, which it sources), the expert GEMMs measured
# against the model: a probe's JSON made up here (every GEMM 100 us; a grouped way for one GEMM of
# one case) reported beside the model (the script reads simulate --explain-json; its predictions
# are checked against the same scenario's --explain-json here, and the sums and rates worked by
# hand); a GEMM missing, a probe of no case, a GPU with no device file and bad --cases, one line
# each. Where a python3 here imports torch, also stagecraft_tools.moe_probe's own check (its GEMMs
# against a float64 reference); without torch that part is skipped, and said so.
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/cli_lib.bash"
mp="$root/scripts/moe-probe.sh"

fixture() {  # fixture FILE DEVICE [GEMM TO LEAVE OUT] [DTYPE]
  python3 - "$1" "$2" "${3:-}" "${4:-bf16}" <<'PY'
import json, sys
path, device, leave, dtype = sys.argv[1:]
gemms = [("F", "expert.fc", 2), ("F", "expert.fc2", 1), ("I", "expert.fc2.dX", 1), ("I", "expert.fc.dX", 2),
         ("W", "expert.fc2.dW", 1), ("W", "expert.fc.dW", 2)]
def case(g, r):
    ks = [{"pass": p, "name": n, "impl": "loop", "us": 100.0, "flops": 2.0 * g * r * 4096 * 1536 * up}
          for p, n, up in gemms if n != leave]
    return {"groups": g, "rows": r, "kernels": ks}
cases = [case(16, 512), case(4, 4096)]
cases[0]["kernels"].append({"pass": "F", "name": "expert.fc", "impl": "grouped", "us": 50.0,
                            "flops": 2.0 * 16 * 512 * 4096 * 3072})
json.dump({"device": device, "torch": "made up", "dtype": dtype, "reps": 1, "hidden": 4096, "ffn": 1536,
           "models": cases}, open(path, "w"))
PY
}

fixture "$tmp/h100.json" "NVIDIA H100 80GB HBM3"
STAGECRAFT="$sc" "$mp" --json "$tmp/h100.json" --out "$tmp/o" >"$tmp/out" 2>"$tmp/err"
checkf "report: exit 0" '[[ $? -eq 0 ]]' "$tmp/err"
check "report: the H100's name picks H100-SXM" 'grep -q "predicted on H100-SXM$" "$tmp/o/moe-probe.md"'
# By hand: the loop's six GEMMs 600 us for 16 x 512 rows: 2·16·512·4096·1536·(2 + 1 + 1 + 2 + 1 + 2)
# FLOPs = 927.7 GFLOP, 1546 TFLOP/s; the grouped fc alone 50 us, 206.2 GFLOP: 4123 TFLOP/s.
check "report: the loop's sums and rate by hand" \
  'grep -qE "^\| 16 x 512 \| loop \| 200 / [0-9]+ \| 200 / [0-9]+ \| 200 / [0-9]+ \| 1546 / [0-9]+ \| [0-9.]+ \|$" "$tmp/o/moe-probe.md"'
check "report: the grouped way's one GEMM" \
  'grep -qE "^\| 16 x 512 \| grouped \| 50 / [0-9]+ \| 0 / 0 \| 0 / 0 \| 4123 / [0-9]+ \| [0-9.]+ \|$" "$tmp/o/moe-probe.md"'
# The predictions are the model's own: the expert GEMMs of a MoE layer with 16 experts of 512 rows
# each (top-1 over a sequence of 8192), as --explain-json times them.
cat >"$tmp/moe.yaml" <<'YAML'
name: same-layer
topology: {device: H100-SXM, nodes: 1, devices_per_node: 1, links: []}
model: {transformer: {layers: 1, hidden: 4096, heads: 32, seq: 8192, vocab: 50304, dropout: false, attention: flash,
                      bias: false, activation: swiglu, moe: {experts: 16, top_k: 1, expert_hidden: 1536}}}
pipeline: {schedule: 1f1b, ranks: 1, microbatches: 1, microbatch_size: 1, steps: 1}
training: {optimizer: adam, lr: 0.0001, dtype: bf16}
YAML
"$sc" simulate "$tmp/moe.yaml" --explain-json "$tmp/explain.json" >/dev/null 2>"$tmp/err"
checkf "explain of the same layer: exit 0" '[[ $? -eq 0 ]]' "$tmp/err"
python3 - "$tmp/explain.json" "$tmp/o/moe-probe-compare.json" <<'PY' || fail=1
import json, sys
ex, cmp_ = (json.load(open(p)) for p in sys.argv[1:])
want = {k["name"]: k["time_us"] for s in ex["sections"] if s["id"] == "moe_block" for k in s["kernels"]
        if k["name"].startswith("expert.fc")}
loop = next(c for c in cmp_["cases"] if (c["groups"], c["rows"], c["impl"]) == (16, 512, "loop"))
got = {k["name"]: k["predicted_us"] for k in loop["kernels"]}
ok = len(got) == 6 and all(abs(got[n] - want[n]) < 1e-6 for n in got) and abs(loop["measured_us"] - 600) < 1e-9
print("ok" if ok else f"FAIL: predicted {got} against explain's {want}")
sys.exit(0 if ok else 1)
PY
check "report: written whole, no temporaries left" '[[ -s "$tmp/o/moe-probe-compare.json" && -z "$(ls "$tmp/o" | grep tmp)" ]]'

# An FP8 probe is predicted with training.fp8: the same layer's expert GEMMs at the FP8 peak.
fixture "$tmp/fp8.json" "NVIDIA H100 80GB HBM3" "" fp8
STAGECRAFT="$sc" "$mp" --json "$tmp/fp8.json" --out "$tmp/o8" >"$tmp/out" 2>"$tmp/err"
checkf "fp8 report: exit 0" '[[ $? -eq 0 ]] && grep -q "fp8, median" "$tmp/o8/moe-probe.md"' "$tmp/err"
sed 's/dtype: bf16}/dtype: bf16, fp8: true}/' "$tmp/moe.yaml" >"$tmp/moe8.yaml"
"$sc" simulate "$tmp/moe8.yaml" --explain-json "$tmp/explain8.json" >/dev/null 2>"$tmp/err"
checkf "explain of the same layer in FP8: exit 0" '[[ $? -eq 0 ]]' "$tmp/err"
python3 - "$tmp/explain8.json" "$tmp/o8/moe-probe-compare.json" "$tmp/explain.json" <<'PY' || fail=1
import json, sys
ex8, cmp_, ex16 = (json.load(open(p)) for p in sys.argv[1:])
def times(ex):
    return {k["name"]: k["time_us"] for s in ex["sections"] if s["id"] == "moe_block" for k in s["kernels"]
            if k["name"] in ("expert.fc", "expert.fc2", "expert.fc.dX", "expert.fc2.dX", "expert.fc.dW", "expert.fc2.dW")}
want, bf16 = times(ex8), times(ex16)
loop = next(c for c in cmp_["cases"] if (c["groups"], c["rows"], c["impl"]) == (16, 512, "loop"))
got = {k["name"]: k["predicted_us"] for k in loop["kernels"]}
ok = len(got) == 6 and all(abs(got[n] - want[n]) < 1e-6 for n in got) and all(got[n] < bf16[n] for n in got)
print("ok" if ok else f"FAIL: predicted {got} against explain's {want} (bf16 {bf16})")
sys.exit(0 if ok else 1)
PY

fixture "$tmp/short.json" "NVIDIA H100 80GB HBM3" "expert.fc2.dX"
STAGECRAFT="$sc" "$mp" --json "$tmp/short.json" --out "$tmp/o2" >"$tmp/out" 2>"$tmp/err"
check "a GEMM missing: non-zero exit, one line naming it" \
  '[[ $? -ne 0 && $(wc -l <"$tmp/err") -eq 1 ]] && grep -q "differ: .*expert.fc2.dX" "$tmp/err" && [[ ! -e "$tmp/o2/moe-probe.md" ]]'
fixture "$tmp/other.json" "Some Other GPU"
STAGECRAFT="$sc" "$mp" --json "$tmp/other.json" --out "$tmp/o3" >"$tmp/out" 2>"$tmp/err"
check "a GPU with no device file: non-zero exit, one line" \
  '[[ $? -ne 0 && $(wc -l <"$tmp/err") -eq 1 ]] && grep -q "no device file for .Some Other GPU.: name one with --device-file" "$tmp/err"'
STAGECRAFT="$sc" "$mp" --json "$tmp/other.json" --device-file H200 --out "$tmp/o3" >"$tmp/out" 2>"$tmp/err"
checkf "--device-file names it" '[[ $? -eq 0 ]] && grep -q "predicted on H200$" "$tmp/o3/moe-probe.md"' "$tmp/err"
echo '{"device": "NVIDIA H100 80GB HBM3", "dtype": "bf16", "hidden": 4096, "ffn": 1536, "models": []}' >"$tmp/none.json"
STAGECRAFT="$sc" "$mp" --json "$tmp/none.json" --out "$tmp/o4" >"$tmp/out" 2>"$tmp/err"
check "a probe of no case: non-zero exit, one line" \
  '[[ $? -ne 0 && $(wc -l <"$tmp/err") -eq 1 ]] && grep -q "the probe timed no model" "$tmp/err"'
expect_command_error "bad --cases" "--cases: '16x': expected GROUPSxROWS" 2 \
  env PYTHONPATH="$root/tools" python3 -m stagecraft_tools.moe_probe --cases 16x

# With PyTorch: the probe's GEMMs against a float64 reference.
py=""
for candidate in python3 /usr/bin/python3; do
  "$candidate" -c 'import torch' 2>/dev/null && { py="$candidate"; break; }
done
if [[ -z "$py" ]]; then
  echo "skipped: moe_probe.py's check (no python3 here imports torch)"
else
  PYTHONPATH="$root/tools" "$py" -m stagecraft_tools.moe_probe --check >"$tmp/out" 2>"$tmp/err"
  checkf "moe_probe --check: exit 0" '[[ $? -eq 0 ]] && grep -q "match the reference" "$tmp/out"' "$tmp/err"
fi
exit $fail
