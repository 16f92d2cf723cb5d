#!/usr/bin/env bash
# scripts/attention-probe.sh, the fused attention kernel measured against the model: a probe's JSON
# made up here (every pass 1,000 us; FlashAttention-2 for one case only) reported beside the model
# (its predictions checked against the same block's --explain-json, the rates worked by hand); a
# pass missing, a probe of no case, a GPU with no device file and bad --cases, one line each. Where
# a python3 here imports torch 2.0 or later, also stagecraft_tools.attention_probe's own check (the
# forward and backward against a float64 reference); otherwise that part is skipped, and said so.
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/cli_lib.bash"
ap="$root/scripts/attention-probe.sh"

fixture() {  # fixture FILE DEVICE [PASS TO LEAVE OUT]
  python3 - "$1" "$2" "${3:-}" <<'PY'
import json, sys
path, device, leave = sys.argv[1:]
def case(s, h, impls):
    half = 2.0 * s * (s / 2) * h
    ks = [{"pass": p, "name": n, "impl": impl, "us": 1000.0, "flops": half * w * 128}
          for impl in impls for p, n, w in (("F", "flash_attention", 2), ("I", "flash_attention.dX", 5))
          if n != leave]
    return {"seq": s, "heads": h, "kernels": ks}
json.dump({"device": device, "torch": "made up", "reps": 1, "head_dim": 128,
           "models": [case(4096, 32, ("cudnn", "flash")), case(16384, 8, ("cudnn",))]}, open(path, "w"))
PY
}

fixture "$tmp/h100.json" "NVIDIA H100 80GB HBM3"
STAGECRAFT="$sc" "$ap" --json "$tmp/h100.json" --out "$tmp/o" >"$tmp/out" 2>"$tmp/err"
checkf "report: exit 0" '[[ $? -eq 0 ]]' "$tmp/err"
check "report: the H100's name picks H100-SXM" 'grep -q "predicted on H100-SXM$" "$tmp/o/attention-probe.md"'
# By hand: 4096 x 32 heads of 128: F 2·4096·2048·32·256 = 137.4 GFLOP in 1,000 us, 137 TFLOP/s; I 2.5
# times that, 344 TFLOP/s; at 16384 x 8, four times as much: 550 and 1374 TFLOP/s.
check "report: the rates by hand" \
  'grep -qE "^\| 4096 x 32 \| cudnn \| 1000 / [0-9]+ \| 1000 / [0-9]+ \| 137 / [0-9]+ \| 344 / [0-9]+ \| [0-9.]+ \|$" "$tmp/o/attention-probe.md" &&
   grep -qE "^\| 4096 x 32 \| flash \| " "$tmp/o/attention-probe.md" &&
   grep -qE "^\| 16384 x 8 \| cudnn \| 1000 / [0-9]+ \| 1000 / [0-9]+ \| 550 / [0-9]+ \| 1374 / [0-9]+ \| [0-9.]+ \|$" "$tmp/o/attention-probe.md" &&
   ! grep -qE "^\| 16384 x 8 \| flash" "$tmp/o/attention-probe.md"'
# The predictions are the model's own: one block of 32 heads of 128 (hidden 4096) over 4096 tokens
# with fused attention, as --explain-json times it.
cat >"$tmp/block.yaml" <<'YAML'
name: same-block
topology: {device: H100-SXM, nodes: 1, devices_per_node: 1, links: []}
model: {transformer: {layers: 1, hidden: 4096, heads: 32, seq: 4096, vocab: 50304, dropout: false, attention: flash}}
pipeline: {schedule: 1f1b, ranks: 1, microbatches: 1, microbatch_size: 1, steps: 1}
training: {optimizer: adam, lr: 0.0001, dtype: bf16}
YAML
"$sc" simulate "$tmp/block.yaml" --explain-json "$tmp/explain.json" >/dev/null 2>"$tmp/err"
checkf "explain of the same block: exit 0" '[[ $? -eq 0 ]]' "$tmp/err"
python3 - "$tmp/explain.json" "$tmp/o/attention-probe-compare.json" <<'PY' || fail=1
import json, sys
ex, cmp_ = (json.load(open(p)) for p in sys.argv[1:])
want = {k["name"]: k["time_us"] for s in ex["sections"] if s["id"] == "block" for k in s["kernels"]
        if k["name"].startswith("flash_attention")}
case = next(c for c in cmp_["cases"] if (c["seq"], c["heads"], c["impl"]) == (4096, 32, "cudnn"))
got = {k["name"]: k["predicted_us"] for k in case["kernels"]}
ok = len(got) == 2 and all(abs(got[n] - want[n]) < 1e-6 for n in got) and abs(case["measured_us"] - 2000) < 1e-9
print("ok" if ok else f"FAIL: predicted {got} against explain's {want}")
sys.exit(0 if ok else 1)
PY
check "report: written whole, no temporaries left" '[[ -s "$tmp/o/attention-probe-compare.json" && -z "$(ls "$tmp/o" | grep tmp)" ]]'

fixture "$tmp/short.json" "NVIDIA H100 80GB HBM3" "flash_attention.dX"
STAGECRAFT="$sc" "$ap" --json "$tmp/short.json" --out "$tmp/o2" >"$tmp/out" 2>"$tmp/err"
check "a pass missing: non-zero exit, one line naming it" \
  '[[ $? -ne 0 && $(wc -l <"$tmp/err") -eq 1 ]] && grep -q "expected flash_attention and flash_attention.dX" "$tmp/err" && [[ ! -e "$tmp/o2/attention-probe.md" ]]'
fixture "$tmp/other.json" "Some Other GPU"
STAGECRAFT="$sc" "$ap" --json "$tmp/other.json" --out "$tmp/o3" >"$tmp/out" 2>"$tmp/err"
check "a GPU with no device file: non-zero exit, one line" \
  '[[ $? -ne 0 && $(wc -l <"$tmp/err") -eq 1 ]] && grep -q "no device file for .Some Other GPU.: name one with --device-file" "$tmp/err"'
STAGECRAFT="$sc" "$ap" --json "$tmp/other.json" --device-file H200 --out "$tmp/o3" >"$tmp/out" 2>"$tmp/err"
checkf "--device-file names it" '[[ $? -eq 0 ]] && grep -q "predicted on H200$" "$tmp/o3/attention-probe.md"' "$tmp/err"
echo '{"device": "NVIDIA H100 80GB HBM3", "head_dim": 128, "models": []}' >"$tmp/none.json"
STAGECRAFT="$sc" "$ap" --json "$tmp/none.json" --out "$tmp/o4" >"$tmp/out" 2>"$tmp/err"
check "a probe of no case: non-zero exit, one line" \
  '[[ $? -ne 0 && $(wc -l <"$tmp/err") -eq 1 ]] && grep -q "the probe timed no model" "$tmp/err"'
expect_command_error "bad --cases" "--cases: '4095x8': expected SEQxHEADS" 2 \
  env PYTHONPATH="$root/tools" python3 -m stagecraft_tools.attention_probe --cases 4095x8

# With PyTorch 2.0 or later: the attention against a float64 reference.
py=""
for candidate in python3 /usr/bin/python3; do
  "$candidate" -c 'import torch; assert hasattr(torch.nn.functional, "scaled_dot_product_attention")' 2>/dev/null &&
    { py="$candidate"; break; }
done
if [[ -z "$py" ]]; then
  echo "skipped: attention_probe.py's check (no python3 here imports torch 2.0 or later)"
else
  PYTHONPATH="$root/tools" "$py" -m stagecraft_tools.attention_probe --check >"$tmp/out" 2>"$tmp/err"
  checkf "attention_probe --check: exit 0" '[[ $? -eq 0 ]] && grep -q "matches the reference" "$tmp/out"' "$tmp/err"
fi
exit $fail
