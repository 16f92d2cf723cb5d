#!/usr/bin/env bash
# `stagecraft execute --backend cuda` end to end where `stagecraft devices` finds the cuda
# backend usable (ctest label gpu; exit 77, counted as skipped, otherwise, with the reason):
# every schedule of a small MLP on 2 ranks with finite losses, the flush schedules' alike and
# falling, kernels loaded eagerly, and the device and transport named; each GEMM dtype; `profile --backend cuda`; a rank
# that throws mid-step on the GPU, and a rank whose start-up fails while making its GPU's device
# or its transport (NCCL or host staging), each ending every rank with one cause and no output.
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/cli_lib.bash"
if ! "$sc" devices --quiet; then
  echo "SKIPPED: $("$sc" devices | sed -n 's/^verdict: //p')"
  exit 77
fi
"$sc" devices
mpi="$root/scripts/mpirun.sh"
scenario="$root/scenarios/mlp-gpu.yaml"
small=(--backend cuda --set model.mlp.layers=8 --set model.mlp.hidden=512 --set pipeline.microbatch_size=64
       --set pipeline.steps=4 --set pipeline.microbatches=8 --set training.lr=0.001)

timeout 600 "$mpi" 2 "$sc" execute "$scenario" "${small[@]}" --set training.dtype=fp32 --json "$tmp/m.json" \
  >"$tmp/out" 2>"$tmp/err"
rc=$?
check "cuda all schedules: exit 0" '[[ $rc -eq 0 ]]'
[[ $rc -eq 0 ]] || cat "$tmp/err"
# The command probes CUDA before it makes its device: eager kernel loading must still hold.
check "cuda: kernels load eagerly (no lazy-loading warning)" '! grep -q "loads kernels lazily" "$tmp/err"'
check "cuda: the device and transport are named" 'grep -q "(cuda:[0-9]" "$tmp/out" && grep -Eq "/(nccl|mpi \(host-staged\))\)" "$tmp/out"'
grep -m1 "^scenario" "$tmp/out"
python3 - "$tmp/m.json" <<'PY' || fail=1
import json, math, sys
m = json.load(open(sys.argv[1]))
names = sorted(s["schedule"] for s in m["schedules"])
ok = names == sorted(["gpipe", "1f1b", "pipedream", "2bw", "pipemare", "interleaved", "zb-h1", "zb-h2", "zb-v", "dualpipe-v"])
if not ok: print("FAIL: schedules", names)
losses = {s["schedule"]: s["losses"] for s in m["schedules"]}
for s in m["schedules"]:
    l = s["losses"]
    if len(l) != 4 or not all(math.isfinite(x) for x in l):
        print("FAIL:", s["schedule"], "losses", l); ok = False
    print(f'{s["schedule"]:<12} {s["step_time_ms"]:8.3f} ms/step  losses {l[0]:.5f} -> {l[-1]:.5f}')
# The flush schedules do the same math in another order: the same losses at every step.
flush = ["gpipe", "1f1b", "interleaved", "zb-h1", "zb-h2", "zb-v", "dualpipe-v"]
for n in flush:
    for a, b in zip(losses.get(n, []), losses.get("1f1b", [])):
        if abs(a - b) > 1e-3 * abs(b):
            print("FAIL:", n, "losses", losses[n], "differ from 1f1b's", losses["1f1b"]); ok = False; break
if ok and not losses["1f1b"][-1] < losses["1f1b"][0]:
    print("FAIL: 1f1b's loss did not fall", losses["1f1b"]); ok = False
sys.exit(0 if ok else 1)
PY

for dtype in tf32 bf16 fp16; do
  timeout 300 "$mpi" 2 "$sc" execute "$scenario" "${small[@]}" --set training.dtype=$dtype \
    --set pipeline.schedule=zb-h1 --json "$tmp/$dtype.json" >"$tmp/out" 2>"$tmp/err"
  rc=$?
  check "cuda $dtype: exit 0" '[[ $rc -eq 0 ]]'
  [[ $rc -eq 0 ]] || cat "$tmp/err"
  check "cuda $dtype: finite falling losses" "python3 -c 'import json,math,sys; l=json.load(open(\"$tmp/$dtype.json\"))[\"schedules\"][0][\"losses\"]; sys.exit(0 if all(map(math.isfinite,l)) and l[-1]<l[0] else 1)'"
done

timeout 300 "$mpi" 2 "$sc" profile "$scenario" "${small[@]}" --out "$tmp/p.yaml" --calibration-steps 3 >"$tmp/out" 2>"$tmp/err"
rc=$?
check "profile on cuda: exit 0 and a profile" '[[ $rc -eq 0 && -s "$tmp/p.yaml" ]]'
[[ $rc -eq 0 ]] || cat "$tmp/err"

rm -f "$tmp/f.json"
start=$SECONDS
timeout 120 "$mpi" 2 "$sc" execute "$scenario" "${small[@]}" --set pipeline.schedule=1f1b --inject-fault 1:1 \
  --json "$tmp/f.json" >"$tmp/fout" 2>"$tmp/ferr"
rc=$?
check "cuda rank throws: non-zero exit" '[[ $rc -ne 0 ]]'
check "cuda rank throws: no hang (exit $rc, $((SECONDS - start)) s)" '[[ $rc -ne 124 && $rc -ne 137 ]]'
check "cuda rank throws: cause printed once" '[[ $(grep -c "stagecraft: error: rank 1 .*injected fault at step 1" "$tmp/ferr") -eq 1 ]]'
check "cuda rank throws: no JSON written" '[[ ! -e "$tmp/f.json" ]]'
[[ $fail -eq 0 ]] || { echo "--- stderr:"; cat "$tmp/ferr"; }

# Start-up that fails on one rank (the test hook of cli/src/command_support.h): while making its
# GPU's device, its peer waits in the agreement and the job ends at once; while connecting the
# ranks, its peer may first wait for it inside NCCL's set-up until --timeout 5s.
for hook in 1:device 0:transport; do
  rm -f "$tmp/s.json"
  start=$SECONDS
  STAGECRAFT_FAIL_STARTUP_ON_RANK=$hook timeout 120 "$mpi" 2 "$sc" execute "$scenario" "${small[@]}" \
    --set pipeline.schedule=1f1b --timeout 5s --json "$tmp/s.json" >"$tmp/sout" 2>"$tmp/serr"
  rc=$?
  check "cuda start-up fault $hook: non-zero exit" '[[ $rc -ne 0 ]]'
  check "cuda start-up fault $hook: no hang (exit $rc, $((SECONDS - start)) s)" \
    '[[ $rc -ne 124 && $rc -ne 137 && $((SECONDS - start)) -lt 30 ]]'
  check "cuda start-up fault $hook: cause printed once" \
    '[[ $(grep -c "stagecraft: error: rank ${hook%%:*} .*start-up failed .*injected start-up fault" "$tmp/serr") -eq 1 ]]'
  check "cuda start-up fault $hook: no JSON written" '[[ ! -e "$tmp/s.json" ]]'
  [[ $fail -eq 0 ]] || { echo "--- stderr:"; cat "$tmp/serr"; }
done
exit $fail
