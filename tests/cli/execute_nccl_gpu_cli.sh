#!/usr/bin/env bash
# `stagecraft execute --backend cuda` over NCCL, 2 ranks with a GPU each (ctest label gpu; exit
# 77, counted as skipped, with the reason where the cuda backend is not usable, NCCL is missing
# or there are fewer than 2 GPUs): two schedules in one job (each prepares its routes), then a
# run of the two with step graphs (--graphs on: the transfers recorded into them), then a
# rank that hangs in the middle of the run (--inject-fault 1:1:hang). Its peer's GPU waits on a
# receive ordered on the device, not on the host; the peer's read-back of that step runs into
# --timeout, names the RECV op, aborts every NCCL communicator and ends the job: non-zero exit
# within the deadline plus a margin (less than twice the deadline), one error line, no output.
# Then the same for a replica whose peer waits in an NCCL all-reduce (P = 1 x D = 2).
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/cli_lib.bash"
if ! "$sc" devices --quiet; then
  echo "SKIPPED: $("$sc" devices | sed -n 's/^verdict: //p')"
  exit 77
fi
usable=$("$sc" devices --json - | python3 -c '
import json, sys
d = json.load(sys.stdin)
print(sum(1 for g in d["gpus"] if g["usable"]) if d["backends"]["nccl"] else -1)')
if [[ "$usable" -lt 2 ]]; then
  [[ "$usable" -lt 0 ]] && why="this build has no NCCL" || why="$usable usable GPU(s) here"
  echo "SKIPPED: NCCL between 2 ranks needs a GPU per rank: $why"
  exit 77
fi
mpi="$root/scripts/mpirun.sh"
scenario="$root/scenarios/mlp-gpu.yaml"
small=(--backend cuda --set model.mlp.layers=8 --set model.mlp.hidden=512 --set pipeline.microbatch_size=64
       --set pipeline.steps=4 --set pipeline.microbatches=8 --set training.lr=0.001 --set training.dtype=fp32)

timeout 300 "$mpi" 2 "$sc" execute "$scenario" "${small[@]}" --set 'pipeline.schedule=[1f1b,zb-v]' \
  --timeout 60s --json "$tmp/ok.json" >"$tmp/out" 2>"$tmp/err"
checkf "nccl, two schedules: exit 0" '[[ $? -eq 0 ]]' "$tmp/err"
check "nccl, two schedules: the transport is NCCL's" 'grep -q "/nccl)" "$tmp/out"'
check "nccl, two schedules: finite losses" "python3 -c 'import json,math,sys; m=json.load(open(\"$tmp/ok.json\")); sys.exit(0 if len(m[\"schedules\"])==2 and all(math.isfinite(x) for s in m[\"schedules\"] for x in s[\"losses\"]) else 1)'"

# The same two schedules with step graphs: each rank's steady step captured with its NCCL
# transfers and replayed (steps 2-3), the losses those of the run above (fp32: the same kernels
# in the same order, to 1e-5 relative).
timeout 300 "$mpi" 2 "$sc" execute "$scenario" "${small[@]}" --set 'pipeline.schedule=[1f1b,zb-v]' \
  --timeout 60s --graphs on --json "$tmp/graphs.json" >"$tmp/gout" 2>"$tmp/gerr"
checkf "nccl, step graphs: exit 0" '[[ $? -eq 0 ]]' "$tmp/gerr"
check "nccl, step graphs: both schedules captured" \
  '[[ $(grep -c "^execute: \(1f1b\|zb-v\): step graphs: step 1 captured" "$tmp/gerr") -eq 2 ]]'
check "nccl, step graphs: the losses of the run without" "python3 -c '
import json, sys
a = json.load(open(\"$tmp/ok.json\"))[\"schedules\"]; b = json.load(open(\"$tmp/graphs.json\"))[\"schedules\"]
ok = len(a) == len(b) == 2 and all(len(x[\"losses\"]) == len(y[\"losses\"]) == 4 and
    all(abs(p - q) <= 1e-5 * max(1.0, abs(p)) for p, q in zip(x[\"losses\"], y[\"losses\"])) for x, y in zip(a, b))
sys.exit(0 if ok else 1)'"

# hang_case NAME DEADLINE_S EXPECTED ARGS...: the job ends non-zero, not killed by timeout(1),
# within DEADLINE_S + 10 s of its start (start-up and the first step included; a second wait of
# the deadline would exceed it), with exactly one error line matching EXPECTED and no JSON.
hang_case() {
  local name="$1" deadline="$2" expect="$3"; shift 3
  rm -f "$tmp/f.json"
  local start_ns; start_ns=$(date +%s%N)
  timeout 180 "$mpi" 2 "$sc" execute "$scenario" "${small[@]}" "$@" --inject-fault 1:1:hang --timeout "${deadline}s" \
    --json "$tmp/f.json" >"$tmp/fout" 2>"$tmp/ferr"
  local rc=$? ms=$(( ($(date +%s%N) - start_ns) / 1000000 ))
  echo "$name: exit $rc after $ms ms (deadline $deadline s)"
  check "$name: non-zero exit" '[[ $rc -ne 0 ]]'
  check "$name: not killed by timeout(1)" '[[ $rc -ne 124 && $rc -ne 137 ]]'
  check "$name: over within the deadline + 10 s ($ms ms)" '[[ $ms -lt $(( (deadline + 10) * 1000 )) ]]'
  check "$name: one error line" '[[ $(grep -c "^stagecraft: error:" "$tmp/ferr") -eq 1 ]]'
  check "$name: it names the wait" 'grep -q "^stagecraft: error: $expect" "$tmp/ferr"'
  check "$name: the hung rank said where it hung" 'grep -q "rank 1 hangs at step 1" "$tmp/ferr"'
  check "$name: no JSON written" '[[ ! -e "$tmp/f.json" ]]'
  [[ $fail -eq 0 ]] || { echo "--- stderr of $name:"; cat "$tmp/ferr"; }
}
hang_case "nccl: a hung rank" 15 \
  "rank 0 .*0RECV_B[0-9]* (step 1) from rank 1 timed out: the NCCL receive from rank 1 (tag [0-9]*) did not complete within 15 s: a peer is hung or gone (every NCCL communicator of this rank was aborted)" \
  --set pipeline.schedule=1f1b
hang_case "nccl: a hung replica" 15 \
  "rank 0 .*0REDUCE_GRAD[0-9]* (step 1) timed out: the NCCL all-reduce of [0-9]* floats over 2 replicas did not complete within 15 s" \
  --set pipeline.schedule=1f1b --set pipeline.ranks=1 --set pipeline.data_parallel=2
exit $fail
