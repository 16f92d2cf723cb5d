#!/usr/bin/env bash
# Asynchronous pipelines judged by time to a target loss (DESIGN.md §10): execute with
# training.target_loss records per schedule the step and the wall time at which the moving mean
# of the loss first reaches it (checked here against the run's own losses and step times), the
# table and compare show it beside samples/s, --plot draws loss against wall time, and pipemare
# keeps one weight version. Bad training input is one line.
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/cli_lib.bash"
mpi="$root/scripts/mpirun.sh"
scenario="$root/scenarios/mlp-cpu.yaml"
small=(--set model.mlp.hidden=64 --set pipeline.microbatch_size=16 --set pipeline.steps=12
       --set 'pipeline.schedule=[1f1b, pipedream, pipemare]')
training='training={optimizer: adam, lr: 0.003, seed: 1, target_loss: 0.5, loss_window: 2, lr_schedule: {warmup_steps: 2, decay: cosine, min_lr: 0.0003}, pipemare: {correction: true, lr_reschedule_steps: 4}}'

timeout 300 "$mpi" 2 "$sc" execute "$scenario" "${small[@]}" --set "$training" --json "$tmp/m.json" \
  --plot "$tmp/loss.png" >"$tmp/out" 2>"$tmp/err"
rc=$?
checkf "execute: exit 0" '[[ $rc -eq 0 ]]' "$tmp/err"
check "the table has a time-to-target block" 'grep -q "^time to loss 0.5 (mean of 2 steps):" "$tmp/out"'
check "the plot is a PNG" '[[ "$(head -c 4 "$tmp/loss.png" | tail -c 3)" == "PNG" ]]'
python3 - "$tmp/m.json" <<'PY' || fail=1
import json, sys
m = json.load(open(sys.argv[1]))
ok = True
def need(cond, what):
    global ok
    if not cond:
        print("FAIL:", what); ok = False
names = [s["schedule"] for s in m["schedules"]]
need(names == ["1f1b", "pipedream", "pipemare"], f"the three schedules ran: {names}")
for s in m["schedules"]:
    l, t = s["losses"], s["step_ms"]
    need(s["target_loss"] == 0.5 and s["loss_window"] == 2, f"{s['schedule']}: the target and window as stated")
    # The oracle: the first step k >= 1 whose two-step mean is at most 0.5, its time the sum.
    want = next((k for k in range(1, len(l)) if (l[k - 1] + l[k]) / 2 <= 0.5), None)
    need(s["target_reached_step"] == want, f"{s['schedule']}: reached at {s['target_reached_step']}, want {want}")
    if want is None:
        need(s["time_to_target_ms"] is None, f"{s['schedule']}: no time when not reached")
    else:
        need(abs(s["time_to_target_ms"] - sum(t[:want + 1])) < 1e-3, f"{s['schedule']}: time is the steps' sum")
pm = m["schedules"][2]
need(all(r["peak_weight_versions"] == 1 for r in pm["per_rank"]), "pipemare keeps one weight version")
pd = m["schedules"][1]
need(pd["per_rank"][0]["peak_weight_versions"] == 2, "pipedream's first stage of two keeps two")
need(pm["stages"][0]["weight_delay_forward"] == 1 and pm["stages"][0]["weight_delay_backward"] == 0,
     "pipemare's first stage: its forward one update behind, its backward none")
need(any(s["target_reached_step"] is not None for s in m["schedules"]), "the target is reachable here")
sys.exit(0 if ok else 1)
PY

"$sc" simulate "$scenario" "${small[@]}" --set "$training" --json "$tmp/p.json" >/dev/null 2>"$tmp/err"
checkf "simulate: exit 0" '[[ $? -eq 0 ]]' "$tmp/err"
"$sc" compare "$tmp/p.json" "$tmp/m.json" --json "$tmp/c.json" >"$tmp/compare" 2>"$tmp/err"
checkf "compare: exit 0" '[[ $? -eq 0 ]]' "$tmp/err"
check "compare: time to target beside samples/s, per schedule" \
  '[[ $(grep -cE "^  time to loss 0.5: (not reached in 12 step\(s\)|[0-9.]+ ms at step [0-9]+) \([0-9.]+ samples/s\)" "$tmp/compare") -eq 3 ]]'

# ---- bad input: one line each, nothing run ---------------------------------------------------
expect_error "a warm-up of no steps" "training.lr_schedule.warmup_steps: expected an integer in [1, 1048576], got '0'" \
  simulate "$scenario" --set 'training={optimizer: sgd, lr: 0.1, lr_schedule: {warmup_steps: 0}}'
expect_error "a negative warm-up" "training.lr_schedule.warmup_steps: expected an integer in [1, 1048576], got '-2'" \
  simulate "$scenario" --set 'training={optimizer: sgd, lr: 0.1, lr_schedule: {warmup_steps: -2}}'
expect_error "a correction on synchronous schedules" \
  "training.pipemare: rescheduling and correction act on schedule pipemare, which pipeline.schedule does not run (gpipe, 1f1b)" \
  simulate "$scenario" --set 'pipeline.schedule=[gpipe, 1f1b]' --set 'training={optimizer: sgd, lr: 0.1, pipemare: {correction: true}}'
expect_error "a target loss without a loss" "training.target_loss: a target loss needs a run that trains a network" \
  simulate "$scenario" --set 'model={costs: {forward: 1ms, backward_input: 1ms, backward_weight: 1ms}}' \
  --set 'training={optimizer: sgd, lr: 0.1, target_loss: 0.5}'
expect_command_error "a Llama block on the executor" "model.transformer: the executor builds GPT-2's block" "" \
  "$mpi" 2 "$sc" execute "$root/scenarios/gpt-tiny-cpu.yaml" --set model.transformer.kv_heads=2
mkdir -p "$tmp/dir"
expect_command_error "--plot into a folder" "--plot" "" "$mpi" 2 "$sc" execute "$scenario" "${small[@]}" --plot "$tmp/dir"
exit $fail
