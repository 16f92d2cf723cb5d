#!/usr/bin/env bash
# `stagecraft replay`: a measured run replayed from its own trace (the same schedule op for op,
# so the replay's step time differs from the measurement only by the simulator's model of the
# schedule), what-if schedules from its median pass times, and bad input one line each.
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/cli_lib.bash"
mpi="$root/scripts/mpirun.sh"
scenario="$root/scenarios/mlp-cpu.yaml"

timeout 300 "$mpi" 2 "$sc" execute "$scenario" --set 'pipeline.schedule=[1f1b,zb-h1]' --set pipeline.steps=4 \
  --set model.mlp.hidden=256 --json "$tmp/m.json" --trace "$tmp/t.json" >/dev/null 2>"$tmp/err"
checkf "execute: exit 0" '[[ $? -eq 0 ]]' "$tmp/err"
check "execute --json says what ran" 'grep -q "\"scenario_file\":\"$scenario\"" "$tmp/m.json" && grep -q "\"overrides\":\[\"pipeline.schedule=\[1f1b,zb-h1\]\"" "$tmp/m.json"'

"$sc" replay "$tmp/m.json" --trace "$tmp/t.1f1b.json" --json "$tmp/r.json" --trace-out "$tmp/rt.json" >"$tmp/out" 2>"$tmp/err"
checkf "replay: exit 0" '[[ $? -eq 0 ]]' "$tmp/err"
check "replay: op for op" 'grep -qE "^1f1b +[0-9.]+ ms +[0-9.]+%  replayed op for op: step [-+][0-9.]+%" "$tmp/out"'
check "replay: its trace" '[[ -s "$tmp/rt.json" ]]'
# Every compute op of the replay took exactly its measured time, and compare takes the replay
# as a prediction.
python3 - "$tmp/t.1f1b.json" "$tmp/rt.json" "$tmp/r.json" <<'PY' || fail=1
import json, sys
def ops(path):
    t = json.load(open(path))
    return {(e["pid"], e["args"]["op_index"]): e["dur"] for e in t["traceEvents"]
            if e.get("ph") == "X" and e.get("tid") == 0}
measured, replayed = ops(sys.argv[1]), ops(sys.argv[2])
r = json.load(open(sys.argv[3]))
ok = measured.keys() == replayed.keys() and all(abs(measured[k] - replayed[k]) < 0.002 for k in measured)
ok &= r["source"] == "predicted" and r["costs"].startswith("replay:") and r["schedules"][0]["schedule"] == "1f1b"
print("ok" if ok else f"FAIL: replayed op times (keys equal: {measured.keys() == replayed.keys()})")
sys.exit(0 if ok else 1)
PY
"$sc" compare "$tmp/r.json" "$tmp/m.json" >"$tmp/c" 2>"$tmp/err"
checkf "compare the replay: exit 0" '[[ $? -eq 0 ]]' "$tmp/err"

# compare --trace: each step-time error split into the run's cost drift and the model's error,
# which add up to it (the replay of each schedule from its own trace).
"$sc" simulate "$scenario" --set 'pipeline.schedule=[1f1b,zb-h1]' --set pipeline.steps=4 --set model.mlp.hidden=256 \
  --json "$tmp/p.json" >/dev/null 2>"$tmp/err"
"$sc" compare "$tmp/p.json" "$tmp/m.json" --trace "$tmp/t.json" --json "$tmp/c.json" >"$tmp/c" 2>"$tmp/err"
checkf "compare --trace: exit 0" '[[ $? -eq 0 ]]' "$tmp/err"
check "compare --trace: both schedules split" '[[ $(grep -c "step-time error .* = cost drift .* + model error " "$tmp/c") -eq 2 ]]'
check "compare --trace: both bubbles split" '[[ $(grep -c "bubble error .* = cost drift .* + model error .*the replay.s bubble" "$tmp/c") -eq 2 ]]'
python3 - "$tmp/c.json" <<'PY' || fail=1
import json, sys
c = json.load(open(sys.argv[1]))
ok = len(c["schedules"]) == 2
for s in c["schedules"]:
    step = s["step_time_ms"]["error_pct"]
    ok &= abs(s["cost_drift_pct"] + s["model_error_pct"] - step) < 1e-6 and s["replay_step_time_ms"] > 0
    # The replay's bubble, and its error against the run's own.
    ok &= 0 <= s["replay_bubble_fraction"] < 1
    ok &= abs(s["model_bubble_error_pp"] - 100 * (s["replay_bubble_fraction"] - s["bubble_fraction"]["measured"])) < 1e-6
print("ok" if ok else "FAIL: compare --json: cost_drift_pct + model_error_pct = the step-time error; the replay's bubble")
sys.exit(0 if ok else 1)
PY

"$sc" replay "$tmp/m.json" --trace "$tmp/t.1f1b.json" --set 'pipeline.schedule=[1f1b,gpipe,zb-h2]' >"$tmp/out" 2>"$tmp/err"
checkf "what-if: exit 0" '[[ $? -eq 0 ]]' "$tmp/err"
check "what-if: the other schedules from the run's medians" '[[ $(grep -c "what-if, from the run.s median pass times" "$tmp/out") -eq 2 ]]'

expect_error "a predicted file" "source is 'predicted': replay needs a measured run" replay "$tmp/r.json" --trace "$tmp/t.1f1b.json"
# Another number of stages (interleaved's 2 chunks: 4 stages of 2 layers from the run's 2 of 4):
# each new stage gets half of its run stage's pass times.
"$sc" replay "$tmp/m.json" --trace "$tmp/t.1f1b.json" --set pipeline.schedule=interleaved --set pipeline.chunks=2 \
  --json "$tmp/ri.json" >"$tmp/out" 2>"$tmp/err"
checkf "what-if on 4 stages: exit 0" '[[ $? -eq 0 ]]' "$tmp/err"
python3 - "$tmp/m.json" "$tmp/ri.json" <<'PY' || fail=1
import json, sys
run = next(s for s in json.load(open(sys.argv[1]))["schedules"] if s["schedule"] == "1f1b")["stages"]
new = json.load(open(sys.argv[2]))["schedules"][0]["stages"]
ok = len(run) == 2 and len(new) == 4
for s in range(4):
    for key in ("forward_ms", "backward_ms", "step_ms"):
        ok &= abs(new[s][key] - run[s // 2][key] / 2) <= 1e-5 + 1e-4 * run[s // 2][key]
print("ok" if ok else f"FAIL: restaged pass times: run {run}, interleaved {new}")
sys.exit(0 if ok else 1)
PY
expect_error "another layer count" "replay moves per-layer times between splits of the same layers" \
  replay "$tmp/m.json" --trace "$tmp/t.1f1b.json" --set pipeline.schedule=interleaved --set pipeline.chunks=2 \
  --set model.mlp.layers=12
sed 's/"scenario_file":"[^"]*",//' "$tmp/m.json" >"$tmp/old.json"
expect_error "a run without its scenario" "does not say which scenario it ran" replay "$tmp/old.json" --trace "$tmp/t.1f1b.json"
expect_error "a missing trace" "rt-missing.json" replay "$tmp/m.json" --trace "$tmp/rt-missing.json"
# A trace replay cannot use in full is refused naming its first bad event or missing op, and no
# replay is claimed (1f1b's fourth compute event edited or gone; no events at all).
event="$(broken_traces "$tmp/t.1f1b.json" "$tmp/" .json)"
expect_error "a negative dur" "$tmp/neg.json: event $event: \"dur\" is negative (-5)" replay "$tmp/m.json" --trace "$tmp/neg.json"
expect_error "a dur that is text" "$tmp/abc.json: event $event: \"dur\" is not a number (\"abc\")" \
  replay "$tmp/m.json" --trace "$tmp/abc.json"
expect_error "a dur beyond a double" "$tmp/big.json: event $event: \"dur\" is out of range" \
  replay "$tmp/m.json" --trace "$tmp/big.json"
expect_error "an op removed" "of 1f1b is not in the trace: a replay needs every compute op of the run" \
  replay "$tmp/m.json" --trace "$tmp/drop.json"
expect_error "no events" "$tmp/empty.json: no op in traceEvents: a trace of 1f1b holds its" \
  replay "$tmp/m.json" --trace "$tmp/empty.json"

# Errors name the flag the user gave (--trace-out, not --trace), and an override the run file
# stored (execute's --set) is reported as the run file's, not as a --set given to replay.
mkdir "$tmp/dir"
expect_error "--trace-out a directory" "--trace-out $tmp/dir: cannot write: is a directory" \
  replay "$tmp/m.json" --trace "$tmp/t.1f1b.json" --trace-out "$tmp/dir"
expect_error "--trace-out - with two schedules" "--trace-out -: 2 schedules write a trace each" \
  replay "$tmp/m.json" --trace "$tmp/t.1f1b.json" --set 'pipeline.schedule=[1f1b,gpipe]' --trace-out -
sed 's/"overrides":\["pipeline.schedule=\[1f1b,zb-h1\]"/"overrides":["pipeline.microbatches=0","pipeline.schedule=[1f1b,zb-h1]"/' \
  "$tmp/m.json" >"$tmp/stored.json"
expect_error "a bad override stored in the run" \
  "$tmp/stored.json: overrides (stored in the run file, as execute ran $scenario): pipeline.microbatches: expected" \
  replay "$tmp/stored.json" --trace "$tmp/t.1f1b.json"
check "no message says --set for a stored override" '! grep -q -- "--set" "$tmp/err"'
exit $fail
