#!/usr/bin/env bash
# `stagecraft simulate` on a multi-model workload (tasks:) as a user runs it: the shipped sweep's
# table, JSON and device trace agree with each other and with the rule's plain consequences (no
# placement beats the total work spread over the devices; one after another is the sum of the
# tasks alone), the viewer's trace reader takes the trace, and bad input is one line naming the key.
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/cli_lib.bash"
scenario="$root/scenarios/hydra-sweep-4xk80.yaml"

"$sc" simulate "$scenario" --json "$tmp/w.json" --trace "$tmp/w.trace.json" >"$tmp/out" 2>"$tmp/err"
checkf "sweep: exit 0" '[[ $? -eq 0 ]]' "$tmp/err"
check "sweep: the table names both schedulers" 'grep -q "^lrtf " "$tmp/out" && grep -q "^sequential " "$tmp/out"'
python3 - "$tmp" <<'PY' || fail=1
import json, sys
tmp = sys.argv[1]
ok = True
def need(cond, what):
    global ok
    if not cond:
        print("FAIL:", what); ok = False
data = json.load(open(f"{tmp}/w.json"))
w = data["workload"]
tasks = w["tasks"]
need(w["scheduler"] == "lrtf" and w["makespan_ms"] == w["lrtf_makespan_ms"], "the scenario's scheduler is lrtf")
need(len(tasks) == 6 and len(data["schedules"]) == 6, "six tasks, each with its run")
alone = [t["alone_ms"] for t in tasks]
devices = len(w["device_busy_fraction"])
need(devices == 4, f"four devices ({devices})")
need(abs(w["sequential_makespan_ms"] - sum(alone)) < 1e-3 * len(alone), "one after another: the sum of the tasks alone")
need(w["lrtf_makespan_ms"] >= sum(alone) / devices - 1e-3, "no placement beats the work spread over the devices")
need(w["lrtf_makespan_ms"] >= max(alone) - 1e-3, "no placement beats the longest task")
need(w["lrtf_makespan_ms"] < w["sequential_makespan_ms"] / 3, "four devices: LRTF well over 3x sooner")
need(all(0 < f <= 1 for f in w["device_busy_fraction"]), "every device busy under LRTF")
need(max(t["end_ms"] for t in tasks) == w["makespan_ms"], "the last task ends the workload")
for t, s in zip(tasks, data["schedules"]):
    need(s["schedule"] == f"{t['name']}/spilled", f"{t['name']}: its run is named TASK/SCHEDULE")
    need(t["moves"] and t["devices"] == 1, f"{t['name']}: spilled, so it moves")
    need(abs(t["alone_ms"] - t["steps"] * s["step_time_ms"]) < 0.02 * t["alone_ms"],
         f"{t['name']}: alone {t['alone_ms']} about steps x step time")
trace = json.load(open(f"{tmp}/w.trace.json"))
header = trace["stagecraft"]
need(header["tasks"] == [t["name"] for t in tasks], "the trace names the tasks")
ops = [e for e in trace["traceEvents"] if e["ph"] == "X"]
need({e["pid"] for e in ops} == set(range(4)), "every device has a lane")
names = {e["args"]["task"] for e in ops}
need(names == set(header["tasks"]), "every task runs")
# Per device, the turns never overlap, and they end with the workload.
for d in range(4):
    turns = sorted((e["ts"], e["ts"] + e["dur"]) for e in ops if e["pid"] == d)
    need(all(a[1] <= b[0] + 1e-3 for a, b in zip(turns, turns[1:])), f"device {d}: turns overlap")
need(abs(max(e["ts"] + e["dur"] for e in ops) / 1000 - w["makespan_ms"]) < 1e-3, "the trace ends with the workload")
sys.exit(0 if ok else 1)
PY

"$sc" simulate "$scenario" --set pipeline.task_scheduler=sequential --json "$tmp/s.json" >"$tmp/out" 2>"$tmp/err"
checkf "sequential: exit 0" '[[ $? -eq 0 ]]' "$tmp/err"
check "sequential: the makespan is the sequential one" \
  'python3 -c "import json,sys; w=json.load(open(sys.argv[1]))[\"workload\"]; sys.exit(w[\"makespan_ms\"] != w[\"sequential_makespan_ms\"] or w[\"scheduler\"] != \"sequential\")" "$tmp/s.json"'

# The viewer draws the devices' lanes, each task's turns in its colour (viz/app/palette.h): over
# the first 200 s the 2b tasks (the third and fourth, red and teal) and the 3b ones (green and
# yellow) run, the xl ones (blue and orange) wait for them.
view="$(dirname "$sc")/../viz/stagecraft-view"
if [[ -x "$view" ]] && command -v xvfb-run >/dev/null; then
  timeout 120 xvfb-run -a -s "-screen 0 1600x900x24" "$view" "$tmp/w.trace.json" --range 0:200000 \
    --screenshot "$tmp/w.png" --frames 5 >"$tmp/out" 2>"$tmp/err"
  checkf "viewer: draws the workload" '[[ $? -eq 0 && -s "$tmp/w.png" ]]' "$tmp/err"
  read -r _ _ _ red teal green yellow kind_f < <(png_colours "$tmp/w.png" 225,87,89 118,183,178 89,161,79 237,201,72 \
    66,133,244 2>/dev/null) || true
  check "viewer: four tasks' colours on the lanes ($red $teal $green $yellow)" \
    '[[ ${red:-0} -gt 1000 && ${teal:-0} -gt 1000 && ${green:-0} -gt 1000 && ${yellow:-0} -gt 1000 ]]'
  check "viewer: no op coloured by kind (${kind_f:-?} forward-blue pixels)" '[[ ${kind_f:-1} -lt 50 ]]'
else
  echo "SKIP: the viewer's picture (viewer not built or xvfb-run missing)"
fi

expect_error "unknown model" "tasks.0.model: unknown model 'gpt2-9b' (models: gpt2-xl, gpt2-2b, gpt2-3b)" \
  simulate "$scenario" --set "tasks.0.model=gpt2-9b"
expect_error "host too small" "topology.host.memory: the tasks keep" \
  simulate "$scenario" --set topology.host.memory=100GB
expect_error "two schedules" "tasks.1.pipeline.schedule: a task runs one schedule" \
  simulate "$scenario" --set "tasks.1.pipeline.schedule=[spilled, gpipe]"
expect_error "no such scheduler" "pipeline.task_scheduler: " simulate "$scenario" --set pipeline.task_scheduler=fifo
expect_error "explain" "--explain: a workload's tasks each have their own model" simulate "$scenario" --explain
expect_error "execute" "tasks: execute runs one model and the scenario lists 6 tasks" execute "$scenario"
expect_error "plan" "tasks: plan runs one model" plan "$scenario" --gpus 4 --global-batch 4
check "no output left behind" '[[ ! -e "$tmp/bad.json" ]]'
"$sc" simulate "$scenario" --set topology.host.memory=100GB --json "$tmp/bad.json" >/dev/null 2>&1
check "a refused workload writes no JSON" '[[ ! -e "$tmp/bad.json" ]]'
exit $fail
