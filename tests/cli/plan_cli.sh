#!/usr/bin/env bash
# `stagecraft plan`: a small transformer on 2 nodes of 2 devices, global batch 8. The space of
# 1F1B alone is the one worked by hand (24 configurations over 6 layouts, one refused by the
# topology); the JSON holds simulate's metrics for each, every feasible one within the limit on
# every rank; the best is no slower than configurations simulated directly; --write-best
# simulates to the same step; --plot is a PNG; bad input is one line and leaves no output.
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/cli_lib.bash"
cp "$root/tests/data/plan-tiny.yaml" "$tmp/tiny.yaml"
scenario="$tmp/tiny.yaml"
json_of() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print($2)" "$1"; }

# The hand-worked space: T in {1, 2, 4} with P x D x T = 4 gives 6 layouts, T = 4 leaves the node.
"$sc" plan "$scenario" --gpus 4 --global-batch 8 --schedules 1f1b --recompute none --partition even --top 100 \
  --json "$tmp/hand.json" >"$tmp/out" 2>"$tmp/err"
checkf "hand-worked plan: exit 0" '[[ $? -eq 0 ]]' "$tmp/err"
check "6 layouts, 1 refused by the topology, 24 configurations" \
  'grep -q "^layouts P x D x T x C = 4: 6, 1 topology; 5 of them make 24 configurations" "$tmp/out"'
check "the summary line on stderr" 'grep -q "^plan: 24 configurations enumerated over 6 layouts, 24 simulated" "$tmp/err"'
check "1F1B is never stale" '! grep -qE "^ *[0-9]+  1f1b .* [1-9][0-9]*(/[0-9]+)? +[0-9.]+ [KMG]iB" "$tmp/out" && grep -q " stale " "$tmp/out"'

# Asynchronous schedules with their staleness (issue 55): PipeMare on P pipeline ranks is P - 1
# updates behind in its forward and none in its backward ("P-1/0"); 2BW reads version t - 1 at
# step t, so a plan of one step (this scenario's) reads version 0 throughout: "0". A row merges
# two schedules only when their staleness agrees too.
"$sc" plan "$scenario" --gpus 4 --global-batch 8 --schedules pipemare,2bw --recompute none --partition even --top 100 \
  >"$tmp/async" 2>"$tmp/err"
checkf "async plan: exit 0" '[[ $? -eq 0 ]]' "$tmp/err"
python3 - "$tmp/async" <<'PY' || fail=1
import re, sys
ok = True
text = open(sys.argv[1]).read()
# P, D, T (s: sequence parallel), C, E, b, m
rows = re.findall(r"^ *\d+  (pipemare|2bw) +(\d+) +\d+ +\d+s? +\d+ +\d+ +\d+ +(\d+) .* ([0-9/]+) +[0-9.]+ [KMG]?i?B(.*)$", text, re.M)
for name, p, m, stale, rest in rows:
    # One step of m microbatches: the first stage's forwards run ahead of its backwards by at
    # most min(P, m) - 1 updates.
    behind = min(int(p), int(m)) - 1
    want = "0" if name == "2bw" or behind == 0 else f"{behind}/0"
    if stale != want:
        print(f"FAIL: {name} on P = {p}, m = {m}: stale {stale}, want {want}"); ok = False
    if behind > 0 and "the same run" in rest:
        print(f"FAIL: {name} on P = {p}, m = {m}: merged with a schedule of another staleness"); ok = False
ok = ok and any(r[0] == "pipemare" and r[3] != "0" for r in rows)
if not re.search(r"^stale: updates the most stale stage's weights are behind synchronous SGD", text, re.M):
    print("FAIL: the stale column's explanation"); ok = False
if not rows:
    print("FAIL: no pipemare or 2bw rows\n" + text)
sys.exit(0 if ok else 1)
PY
check "the JSON has all 24" '[[ $(json_of "$tmp/hand.json" "len(d[\"configurations\"])") -eq 24 ]]'

# The whole space, K = 3: pruned, with its report, JSON, best scenario and plot.
"$sc" plan "$scenario" --gpus 4 --global-batch 8 --top 3 --refine 1 --search-evaluations 50 \
  --json "$tmp/plan.json" --write-best "$tmp/best.yaml" --plot "$tmp/front.png" >"$tmp/out" 2>"$tmp/err"
checkf "plan: exit 0" '[[ $? -eq 0 ]]' "$tmp/err"
for part in "^top 3 by throughput:" "^why the leaders win" "^rejected: " "pruned by the bound" "^Pareto front" \
            "peak memory per device" "^wrote .*best.yaml"; do
  check "the report has '$part'" 'grep -q "$part" "$tmp/out"'
done
check "the plot is a PNG" '[[ "$(head -c 4 "$tmp/front.png" | tail -c 3)" == "PNG" ]]'
check "each configuration has simulate's metrics" \
  '[[ $(json_of "$tmp/plan.json" "all(set(c[\"metrics\"]) >= {\"step_time_ms\", \"throughput_samples_per_s\", \"bubble_fraction\", \"per_rank\"} for c in d[\"configurations\"])") == True ]]'
check "feasible: every rank's peak within the limit" \
  '[[ $(json_of "$tmp/plan.json" "all(max(r[\"peak_memory_bytes\"] for r in c[\"metrics\"][\"per_rank\"]) <= d[\"memory_limit_bytes\"] for c in d[\"configurations\"] if c[\"fits\"])") == True ]]'
check "some were pruned" '[[ $(json_of "$tmp/plan.json" "d[\"rejected\"][\"pruned by the bound\"] > 0") == True ]]'
best_ms="$(json_of "$tmp/plan.json" "\"%.6f\" % d[\"configurations\"][0][\"metrics\"][\"step_time_ms\"]")"

# --write-best round trip: simulate takes the file as it is, to the same step.
"$sc" simulate "$tmp/best.yaml" --json "$tmp/best.json" >/dev/null 2>"$tmp/err"
checkf "simulate the written best: exit 0" '[[ $? -eq 0 ]]' "$tmp/err"
sim_ms="$(json_of "$tmp/best.json" "\"%.6f\" % d[\"schedules\"][0][\"step_time_ms\"]")"
check "the written best simulates to $sim_ms ms, as plan said ($best_ms)" '[[ "$sim_ms" == "$best_ms" ]]'

# The best is no slower than configurations of the space simulated directly.
for layout in "1f1b 2 1 2 1 8" "zb-h1 2 2 1 1 4" "gpipe 4 1 1 2 4" "1f1b 1 4 1 2 1"; do
  read -r s p d t b m <<<"$layout"
  "$sc" simulate "$scenario" --set pipeline.schedule="$s" --set pipeline.ranks="$p" --set pipeline.data_parallel="$d" \
    --set pipeline.tensor_parallel="$t" --set pipeline.microbatch_size="$b" --set pipeline.microbatches="$m" \
    --json "$tmp/direct.json" >/dev/null 2>"$tmp/err"
  checkf "simulate $layout: exit 0" '[[ $? -eq 0 ]]' "$tmp/err"
  direct_ms="$(json_of "$tmp/direct.json" "\"%.6f\" % d[\"schedules\"][0][\"step_time_ms\"]")"
  check "plan's best ($best_ms ms) no slower than $layout ($direct_ms ms)" \
    'python3 -c "import sys; sys.exit(0 if float(sys.argv[1]) <= float(sys.argv[2]) else 1)" "$best_ms" "$direct_ms"'
done

# The two leading layouts refined by the searched order (with replicas or without).
"$sc" plan "$scenario" --gpus 4 --global-batch 8 --tensor-parallel 2 --top 3 --refine 2 --search-evaluations 30 \
  --json "$tmp/auto.json" >"$tmp/out" 2>"$tmp/err"
checkf "plan with auto: exit 0" '[[ $? -eq 0 ]]' "$tmp/err"
check "auto searched on the leading layouts" '[[ $(grep -c "^note: auto searched on the layout of" "$tmp/out") -eq 2 ]]'
# A searched order joins the configurations only when it is shorter than its start.
shorter="$(grep -c "^note: auto searched on the layout of .* per step, against" "$tmp/out")"
check "the shorter searched orders ($shorter) are among the configurations" \
  '[[ $(json_of "$tmp/auto.json" "sum(c[\"layout\"][\"schedule\"] == \"auto\" for c in d[\"configurations\"])") -eq $shorter ]]'

out=(--json "$tmp/x.json" --write-best "$tmp/x.yaml" --plot "$tmp/x.png")
expect_error "more devices than the topology" "--gpus 5: the topology of" plan "$scenario" --gpus 5 --global-batch 8 "${out[@]}"
expect_error "part of a node" "--gpus 3: beyond one node the job takes whole nodes of 2 devices" \
  plan "$scenario" --gpus 3 --global-batch 8 "${out[@]}"
expect_error "no batch" "--global-batch: expected at least 1 sample, got 0" plan "$scenario" --gpus 4 --global-batch 0 "${out[@]}"
expect_error "a limit that is no size" "--memory-limit: expected a size like 80GiB, got 'lots'" \
  plan "$scenario" --gpus 4 --global-batch 8 --memory-limit lots "${out[@]}"
expect_error "an unknown schedule" "--schedules: unknown schedule 'nope'" \
  plan "$scenario" --gpus 4 --global-batch 8 --schedules 1f1b,nope "${out[@]}"
expect_error "an unknown recompute" "--recompute: 'some' is not one of none, selective, full" \
  plan "$scenario" --gpus 4 --global-batch 8 --recompute some "${out[@]}"
expect_error "nothing fits" "no configuration of 4 devices for a global batch of 8 fits in 1.00 MiB" \
  plan "$scenario" --gpus 4 --global-batch 8 --memory-limit 1MiB "${out[@]}"
expect_error "an unwritable output" "--json" plan "$scenario" --gpus 4 --global-batch 8 --json "$tmp/no/such/x.json"

# Issue 51. The whole work is estimated before the search: a billion samples are refused at once
# (they ran for 84 s into std::bad_alloc), naming the budget; a budget the fewest microbatches
# alone pass is refused; a smaller one keeps the configurations with the fewest microbatches,
# with a note.
expect_command_error "a billion samples" "--max-plan-ops" "" timeout 60 "$sc" plan "$scenario" --gpus 4 \
  --global-batch 1000000000 "${out[@]}"
expect_error "a budget nothing fits" "--global-batch 64: the plan's" plan "$scenario" --gpus 4 --global-batch 64 \
  --max-plan-ops 10 "${out[@]}"
"$sc" plan "$scenario" --gpus 4 --global-batch 64 --schedules 1f1b --max-plan-ops 5000 --refine 0 \
  --json "$tmp/narrow.json" >"$tmp/out" 2>"$tmp/err"
checkf "a narrowed plan: exit 0" '[[ $? -eq 0 ]]' "$tmp/err"
check "the note says what was left out" 'grep -q "^note: --global-batch 64: .*--max-plan-ops.*microbatches were left out" "$tmp/out"'
# On a terminal (script(1) gives it one) the note comes at once, before the plan's work.
script -qec "$(printf '%q ' "$sc" plan "$scenario" --gpus 4 --global-batch 64 --schedules 1f1b --max-plan-ops 5000 \
  --refine 0)" /dev/null | tr -d '\r' >"$tmp/tty"
check "on a terminal the note is said before the plan's work" \
  '[[ "$(grep -n -m1 "plan: note: --global-batch 64: .*microbatches were left out" "$tmp/tty" | cut -d: -f1)" -lt "$(grep -n -m1 "candidates looked at" "$tmp/tty" | cut -d: -f1)" ]]'
check "every configuration kept within the cap" \
  '[[ $(json_of "$tmp/narrow.json" "d[\"max_microbatches\"] > 0 and all(c[\"layout\"][\"microbatches\"] <= d[\"max_microbatches\"] for c in d[\"configurations\"])") == True ]]'

# --threads is bounded; a thread the system cannot start is one line, never std::terminate (a
# 4 GiB stack per thread under an 7.5 GB address space: the second worker cannot start).
expect_error "a thousand threads" "--threads: expected from 1 to" plan "$scenario" --gpus 4 --global-batch 8 --threads 1000
(
  export OPENBLAS_NUM_THREADS=1
  ulimit -s 4194304 && ulimit -v 7500000 || exit 0
  expect_command_error "a thread that cannot start" "--threads: could not start thread 3 of 3" "" \
    timeout 60 "$sc" plan "$scenario" --gpus 4 --global-batch 8 --threads 3 --refine 0
  exit $fail
) || fail=1

# Every numeric flag within its range, named when not.
for bad in "--refine -1" "--refine-seconds nan" "--refine-seconds -1" "--search-evaluations -1" "--top 0" \
           "--max-chunks 1" "--max-microbatch-size -1" "--zero 4" "--max-plan-ops 0"; do
  read -r flag value <<<"$bad"
  expect_error "$bad" "$flag" plan "$scenario" --gpus 4 --global-batch 8 "$flag" "$value"
done

# A misspelt flag is named before the required one it was meant to be (every command).
expect_error "--gpu for --gpus" "plan: unknown option '--gpu' (did you mean --gpus?)" plan "$scenario" --gpu 4 \
  --global-batch 8
expect_error "--jsn for --json" "simulate: unknown option '--jsn' (did you mean --json?)" simulate "$scenario" --jsn x

# Nothing tried is not blamed on memory.
expect_error "--schedules auto alone" "--schedules auto: not a schedule plan can enumerate" \
  plan "$scenario" --gpus 4 --global-batch 8 --schedules auto
expect_error "a T that divides no layout" "--tensor-parallel 3: divides no layout of 4 devices" \
  plan "$scenario" --gpus 4 --global-batch 8 --tensor-parallel 3
expect_error "a T that leaves the node" "can run (1 layouts, 1 layouts: topology): T must divide" \
  plan "$scenario" --gpus 4 --global-batch 8 --tensor-parallel 4
expect_error "a C that divides no layout" "--context-parallel 3: each C must divide the 4 devices (--gpus)" \
  plan "$scenario" --gpus 4 --global-batch 8 --context-parallel 3
expect_error "a C the model cannot take" "--context-parallel 2: the model of $scenario cannot take it: " \
  plan "$scenario" --gpus 4 --global-batch 8 --context-parallel 2

# "why the leaders win" is per step: the split of each leader sums to its step time, whatever
# the steps.
"$sc" plan "$scenario" --gpus 4 --global-batch 8 --set pipeline.steps=4 --top 3 --refine 0 >"$tmp/out" 2>"$tmp/err"
checkf "plan over 4 steps: exit 0" '[[ $? -eq 0 ]]' "$tmp/err"
check "each leader's split sums to its step" 'python3 - "$tmp/out" <<'"'"'PY'"'"'
import re, sys
rows = {}
for line in open(sys.argv[1]):
    m = re.match(r"  (step ms|compute|wait|transfer|collective|overhead|idle) +(.*)", line)
    if m:
        rows[m.group(1)] = [float(x) for x in re.findall(r"(-?[0-9.]+)(?: +[0-9.]+%)?", m.group(2))][: 3]
parts = ["compute", "wait", "transfer", "collective", "overhead", "idle"]
ok = len(rows) == 7 and all(abs(sum(rows[p][k] for p in parts) - rows["step ms"][k]) < 0.01 for k in range(len(rows["step ms"])))
sys.exit(0 if ok else 1)
PY'

# The layout the plan replaces is not validated; the rest of the scenario is.
cp "$root/scenarios/mlp-cpu.yaml" "$tmp/mlp.yaml"
for set in "model.mlp.layers=1" "pipeline.data_parallel=4"; do
  "$sc" plan "$tmp/mlp.yaml" --gpus 2 --global-batch 2 --set "$set" --refine 0 >"$tmp/out" 2>"$tmp/err"
  checkf "plan with --set $set: exit 0" '[[ $? -eq 0 ]]' "$tmp/err"
done
expect_error "a model the plan keeps" "model.mlp.layers" plan "$tmp/mlp.yaml" --gpus 2 --global-batch 2 \
  --set model.mlp.layers=0

# A CPU core's TFLOP/s are small, not zero.
"$sc" plan "$tmp/mlp.yaml" --gpus 2 --global-batch 16 --top 3 --refine 0 >"$tmp/out" 2>"$tmp/err"
checkf "plan on CPU cores: exit 0" '[[ $? -eq 0 ]]' "$tmp/err"
check "TFLOP/s above 0 on every row" \
  '[[ $(awk '"'"'/^ *[0-9]+  /{n++; if ($16 + 0 > 0) ok++} END {print (n > 0 && ok == n)}'"'"' "$tmp/out") == 1 ]]'
exit $fail
