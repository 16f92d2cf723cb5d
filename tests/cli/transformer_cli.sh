#!/usr/bin/env bash
# The transformer as a user runs it, shrunk to seconds: profile -> simulate -> execute -> compare
# on gpt-tiny-cpu's shape made small, every schedule on 2 ranks; the loss falls from about
# ln(vocab); a token file as training.data; and bad input: a token file with a token outside
# the vocabulary, a missing file, hidden not a multiple of heads. Each failure: one line, a
# non-zero exit, no output file.
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/cli_lib.bash"
mpi="$root/scripts/mpirun.sh"
scenario="$root/scenarios/gpt-tiny-cpu.yaml"
small=(--set model.transformer.hidden=32 --set model.transformer.heads=2 --set model.transformer.seq=16
       --set model.transformer.vocab=64 --set pipeline.microbatches=4 --set pipeline.microbatch_size=4
       --set pipeline.steps=20 --set training.lr=0.003)

timeout 300 "$mpi" 2 "$sc" profile "$scenario" "${small[@]}" --calibration-steps 2 --out "$tmp/profile.yaml" \
  >"$tmp/out" 2>"$tmp/err"
check "profile: exit 0" '[[ $? -eq 0 ]]'
check "profile: embedding and head measured" 'grep -q "^embedding:" "$tmp/profile.yaml" && grep -q "^head:" "$tmp/profile.yaml"'
"$sc" simulate "$scenario" "${small[@]}" --set model.profile="$tmp/profile.yaml" --json "$tmp/p.json" >/dev/null 2>"$tmp/err"
check "simulate from the profile: exit 0" '[[ $? -eq 0 ]]'
# The profile against the roofline model of this machine's core: the block's measured F, I and W
# beside the device file's prediction and the fitted one, and the fitted efficiencies. (This
# shape's kernels take microseconds: how well they fit is docs/cost-model.md's, on real sizes.)
"$sc" simulate "$scenario" "${small[@]}" --set topology.device=cpu-core --set model.profile="$tmp/profile.yaml" \
  --explain >"$tmp/explain" 2>"$tmp/err"
checkf "explain against the profile: exit 0" '[[ $? -eq 0 ]]' "$tmp/err"
check "explain against the profile: a fit" 'grep -qE "^fitted: gemm.max_efficiency [0-9.]+ \(stated 0.95\), memory_efficiency [0-9.]+" "$tmp/explain"'
check "explain against the profile: F, I, W measured, stated, fitted" \
  '[[ $(grep -cE "^(F|I|W) +[0-9.]+ +[0-9.]+ \( *[-+][0-9.]+%\) +[0-9.]+ \( *[-+][0-9.]+%\)$" "$tmp/explain") -eq 3 ]]'
# --explain-json holds the same fit: the text's numbers, to the digits the text prints.
"$sc" simulate "$scenario" "${small[@]}" --set topology.device=cpu-core --set model.profile="$tmp/profile.yaml" \
  --explain-json "$tmp/explain.json" >/dev/null 2>"$tmp/err"
checkf "explain-json against the profile: exit 0" '[[ $? -eq 0 ]]' "$tmp/err"
python3 - "$tmp/explain" "$tmp/explain.json" <<'PY' || fail=1
import json, re, sys
text, fit = open(sys.argv[1]).read(), json.load(open(sys.argv[2])).get("profile_fit")
rows = {m[0]: [float(x) for x in m[1:]] for m in re.findall(
    r"^(F|I|W) +([0-9.]+) +([0-9.]+) \( *[-+][0-9.]+%\) +([0-9.]+) \( *[-+][0-9.]+%\)$", text, re.M)}
eff = re.search(r"^fitted: gemm.max_efficiency ([0-9.]+) .*memory_efficiency ([0-9.]+) ", text, re.M)
ok = fit is not None and eff is not None and len(rows) == 3 and [p["pass"] for p in fit["passes"]] == list("FIW") and all(
    abs(p[k] - rows[p["pass"]][i]) <= 0.0005 for p in fit["passes"]
    for i, k in enumerate(("measured_ms", "predicted_ms", "fitted_ms"))) and \
    abs(fit["gemm_max_efficiency"] - float(eff.group(1))) <= 0.005 and abs(fit["memory_efficiency"] - float(eff.group(2))) <= 0.005
print("ok" if ok else f"FAIL: explain-json's profile_fit {fit} against the text's {rows} {eff and eff.groups()}")
sys.exit(0 if ok else 1)
PY
timeout 300 "$mpi" 2 "$sc" execute "$scenario" "${small[@]}" --json "$tmp/m.json" >"$tmp/out" 2>"$tmp/err"
rc=$?
check "execute all: exit 0" '[[ $rc -eq 0 ]]'
[[ $rc -eq 0 ]] || cat "$tmp/err"
"$sc" compare "$tmp/p.json" "$tmp/m.json" >"$tmp/compare" 2>"$tmp/err"
check "compare: exit 0" '[[ $? -eq 0 ]]'
# Each pass per stage, predicted against the run's own median op times: every schedule has a line
# per stage (zb-h1 runs F, I, W and STEP; 1f1b F, B and STEP) and names the pass most off.
check "compare: a line per stage and schedule" '[[ $(grep -cE "^    stage [01]: F [0-9.]+ / [0-9.]+ " "$tmp/compare") -eq 20 ]]'
check "compare: zb-h1's I and W on the last stage" 'sed -n "/^zb-h1:/,/^\$/p" "$tmp/compare" | grep -qE "stage 1: F .* I [0-9.]+ / [0-9.]+ .* W [0-9.]+ / [0-9.]+ .* STEP "'
check "compare: the pass most off" '[[ $(grep -c "^  the pass most off: " "$tmp/compare") -eq 10 ]]'
"$sc" compare "$tmp/p.json" "$tmp/m.json" --json "$tmp/c.json" >/dev/null 2>"$tmp/err"
checkf "compare --json: exit 0" '[[ $? -eq 0 ]]' "$tmp/err"
python3 - "$tmp/c.json" <<'PY' || fail=1
import json, sys
c = json.load(open(sys.argv[1]))
ok = all(len(s["stages"]) in (2, 4) and "forward_ms" in s["stages"][0] and "error_pct" in s["stages"][0]["forward_ms"]
         for s in c["schedules"])
print("ok" if ok else "FAIL: compare --json stages")
sys.exit(0 if ok else 1)
PY
python3 - "$tmp" <<'PY' || fail=1
import json, math, sys
tmp = sys.argv[1]
m = json.load(open(f"{tmp}/m.json"))
ok = True
names = sorted(s["schedule"] for s in m["schedules"])
if names != sorted(["gpipe", "1f1b", "pipedream", "2bw", "pipemare", "interleaved", "zb-h1", "zb-h2", "zb-v", "dualpipe-v"]):
    print("FAIL: every schedule ran:", names); ok = False
for s in m["schedules"]:
    losses = s["losses"]
    # The first step scores about ln 64 = 4.16; twenty steps of the learnable tokens bring it
    # down (to 2.2-3.5 here, stale weights and all).
    if not (len(losses) == 20 and all(math.isfinite(x) for x in losses) and abs(losses[0] - math.log(64)) < 0.4
            and losses[-1] < losses[0] - 0.5):
        print("FAIL:", s["schedule"], "losses", losses); ok = False
sys.exit(0 if ok else 1)
PY

# A token file: any file's bytes (this script's own text) with a vocabulary over 255.
timeout 120 "$mpi" 2 "$sc" execute "$scenario" "${small[@]}" --set model.transformer.vocab=256 \
  --set pipeline.schedule=zb-h1 --set pipeline.steps=2 --set training.data="$0" >"$tmp/out" 2>"$tmp/err"
check "training.data: a text file trains" '[[ $? -eq 0 ]] && grep -q "zb-h1 .*step 2/2" "$tmp/out"'

# Bad input: one line, non-zero, no output file.
cd "$tmp" || exit 1
expect_error "a byte outside the vocabulary" "is outside model.transformer.vocab 64 (a text file's tokens are its bytes" \
  execute "$scenario" "${small[@]}" --set pipeline.ranks=1 --set training.data="$0" --json "$tmp/bad.json"
check "no JSON after bad data" '[[ ! -e "$tmp/bad.json" ]]'
expect_error "a missing token file" "training.data: $tmp/none.bin: cannot read: no such file or directory" \
  execute "$scenario" "${small[@]}" --set pipeline.ranks=1 --set training.data="$tmp/none.bin"
expect_error "hidden not a multiple of heads" "model.transformer.heads: expected heads to divide hidden (32), got 3" \
  execute "$scenario" "${small[@]}" --set pipeline.ranks=1 --set model.transformer.heads=3

exit $fail
