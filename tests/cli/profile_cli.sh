#!/usr/bin/env bash
# `stagecraft profile` then `simulate --set model.profile=...`: the measured profile has one
# entry per layer with positive times and the runtime's real sizes, and the simulator predicts
# from it; bad input follows the one-line contract.
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/cli_lib.bash"
scenario="$root/scenarios/mlp-cpu.yaml"
small=(--set model.mlp.hidden=64 --set pipeline.microbatch_size=16)

"$sc" profile "$scenario" "${small[@]}" --out "$tmp/p.yaml" --repeats 5 >"$tmp/out" 2>&1
check "profile: exit 0" '[[ $? -eq 0 ]]'
python3 - "$tmp/p.yaml" <<'PY' || fail=1
import sys, re
text = open(sys.argv[1]).read()
layers = re.findall(r"- \{forward: (\d+)ns, backward_input: (\d+)ns, backward_weight: (\d+)ns, step: (\d+)ns, "
                    r"copy: (\d+)ns, activation_bytes: (\d+), weight_bytes: (\d+), w_stash_bytes: (\d+), grad_bytes: (\d+), "
                    r"optimizer_bytes: (\d+), workspace_bytes: (\d+), correction: (\d+)ns, velocity: (\d+)ns\}", text)
ok = len(layers) == 8 and "microbatch_size: 16" in text and "send_bytes: 4096" in text
h, b = 64, 16
for l in layers:
    f, i, w, s, c, act, wb, stash, gb, opt, work, corr, vel = map(int, l)
    # Hand-worked sizes: input + pre-activation kept per layer (2·b·h floats), W + bias, adam m and v;
    # the input gradient holds one activation more than before or after it (dz and dx, beside dout).
    ok &= f > 0 and i > 0 and w > 0 and s > 0  # c, what keeping the old version adds, may be 0
    ok &= corr > 0 and vel > 0  # PipeMare's two axpy's around a backward; its velocity's scal and two axpy's
    ok &= act == 2 * b * h * 4 and stash == 2 * b * h * 4 and wb == (h * h + h) * 4 and gb == wb and opt == 2 * wb
    ok &= work == b * h * 4
if not ok:
    print("FAIL: profile content\n" + text)
sys.exit(0 if ok else 1)
PY
"$sc" simulate "$scenario" "${small[@]}" --set model.profile="$tmp/p.yaml" >"$tmp/sim" 2>&1
check "simulate from profile: exit 0" '[[ $? -eq 0 ]]'
check "simulate from profile: says so" 'grep -q "costs: profile:$tmp/p.yaml" "$tmp/sim"'
expect_error "profile of another microbatch size" "profile was measured at microbatch_size 16" \
  simulate "$scenario" --set model.profile="$tmp/p.yaml"
expect_error "costs-only scenario" "it can be simulated only" profile "$root/scenarios/uniform-costs.yaml" --out "$tmp/x.yaml"
check "no profile written on error" '[[ ! -e "$tmp/x.yaml" ]]'
"$sc" profile "$scenario" 2>/dev/null
check "profile without --out: usage error" '[[ $? -eq 2 ]]'
exit $fail
