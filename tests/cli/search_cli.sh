#!/usr/bin/env bash
# `stagecraft search`: on the Zero Bubble paper's costs (4 ranks, 12 microbatches) within 2p
# forwards' activations, it writes a one-step CSV that `simulate` runs to the time search
# printed, the start's and the result's traces, and its explanation; bad flags and a limit no
# generator meets end in one line, with no output written.
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/cli_lib.bash"
scenario="$root/scenarios/zero-bubble-paper.yaml"
small=(--set pipeline.ranks=4 --set topology.devices_per_node=4 --set pipeline.microbatches=12)

"$sc" search "$scenario" "${small[@]}" --memory-limit 2p --evaluations 300 --out "$tmp/s.csv" \
  --trace "$tmp/t.json" >"$tmp/out" 2>"$tmp/err"
rc=$?
checkf "search: exit 0" '[[ $rc -eq 0 ]]' "$tmp/err"
check "search: names its start and result" 'grep -q "^start: " "$tmp/out" && grep -q "^searched: " "$tmp/out"'
check "search: the per-rank explanation" 'grep -q "^rank  *bubble before  *bubble after" "$tmp/out"'
check "search: one row per rank" '[[ $(grep -cE "^[0-3] " "$tmp/out") -eq 4 ]]'
check "search: the CSV has a row per rank" '[[ $(wc -l <"$tmp/s.csv") -eq 4 ]]'
start="$(sed -n 's/^start: \([^ ]*\) at .*/\1/p' "$tmp/out")"
check "search: both traces ($start and searched)" '[[ -s "$tmp/t.$start.json" && -s "$tmp/t.searched.json" ]]'
searched_ms="$(sed -n 's/^searched: .* (one step alone \([0-9.]*\), a long run.*/\1/p' "$tmp/out")"
"$sc" simulate "$scenario" "${small[@]}" --set pipeline.steps=1 --set pipeline.schedule="$tmp/s.csv" \
  --json "$tmp/m.json" >/dev/null 2>"$tmp/err"
checkf "simulate the CSV: exit 0" '[[ $? -eq 0 ]]' "$tmp/err"
sim_ms="$(python3 -c 'import json,sys; print("%.3f" % json.load(open(sys.argv[1]))["schedules"][0]["step_time_ms"])' "$tmp/m.json")"
check "simulate the CSV: $sim_ms ms, as search said ($searched_ms)" '[[ "$sim_ms" == "$searched_ms" ]]'
cat "$tmp/out"

# pipeline.schedule: auto is the same search inside simulate: its step is what search printed
# with the same number of moves.
"$sc" search "$scenario" "${small[@]}" --evaluations 500 --out "$tmp/a.csv" >"$tmp/aout" 2>"$tmp/err"
checkf "search for auto: exit 0" '[[ $? -eq 0 ]]' "$tmp/err"
auto_searched="$(sed -n 's/^searched: .* (one step alone \([0-9.]*\), a long run.*/\1/p' "$tmp/aout")"
"$sc" simulate "$scenario" "${small[@]}" --set pipeline.steps=1 --set pipeline.schedule=auto \
  --set pipeline.search_evaluations=500 --json "$tmp/auto.json" >"$tmp/asim" 2>"$tmp/err"
checkf "simulate auto: exit 0" '[[ $? -eq 0 ]]' "$tmp/err"
auto_ms="$(python3 -c 'import json,sys; s=json.load(open(sys.argv[1]))["schedules"][0]; print(s["schedule"], "%.3f" % s["step_time_ms"])' "$tmp/auto.json")"
check "simulate auto: $auto_ms, as search said ($auto_searched)" '[[ "$auto_ms" == "auto $auto_searched" ]]'
expect_error "no search without moves" "pipeline.search_evaluations" simulate "$scenario" --set pipeline.search_evaluations=0

expect_error "a limit that is no size" "--memory-limit: expected a size like 80GiB, got 'lots'" search "$scenario" --memory-limit lots --out "$tmp/x.csv"
expect_error "a limit no generator meets" "no generator gives a schedule within the memory limit" \
  search "$scenario" "${small[@]}" --memory-limit 0.1p --evaluations 5 --out "$tmp/x.csv"
expect_error "bytes without sizes" "needs the model's sizes" search "$scenario" --memory-limit 1GiB --out "$tmp/x.csv"
expect_error "a start it cannot search" "--from pipedream" search "$scenario" --from pipedream --out "$tmp/x.csv"
expect_error "a negative budget" "--budget" search "$scenario" --budget -1 --out "$tmp/x.csv"
expect_error "an unwritable output" "--out" search "$scenario" --evaluations 5 --out "$tmp/no/such/dir/x.csv"
check "no output left by the failures" '[[ ! -e "$tmp/x.csv" ]]'
exit $fail
