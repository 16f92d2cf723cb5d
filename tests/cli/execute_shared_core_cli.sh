#!/usr/bin/env bash
# scripts/shared_core_report.py on hand-made metrics whose medians and errors are worked out
# here, its bad input one line each; then scripts/shared-core-check.sh end to end at a small
# shape (4 ranks on 2 devices: profile, simulate, one execution, the report).
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/cli_lib.bash"
report="$root/scripts/shared_core_report.py"

metrics() {  # FILE then schedule step_ms bubble ... triples
  local f="$1"; shift
  { echo '{"schedules": ['
    local first=1
    while (($#)); do
      ((first)) || echo ,
      first=0
      printf '{"schedule": "%s", "step_time_ms": %s, "bubble_fraction": %s}' "$1" "$2" "$3"
      shift 3
    done
    echo ']}'; } >"$f"
}
# a: predicted 10 ms, measured 9, 11, 10.5 -> median 10.5, error 10 / 10.5 - 1 = -4.8%; bubble
#    0.50 against the median 0.49: +1.0 pp; run-to-run (11 - 9) / 10.5 = 19.0%.
# b: predicted 20 ms, measured 25, 15, 22 -> median 22, error -9.1%; bubble 0.40 against 0.42:
#    -2.0 pp; run-to-run 45.5%. c is in one run only: left out.
# Median |error| (4.76 + 9.09) / 2 = 6.9% (over 5%), largest 9.1%, bubble 2.0 pp.
metrics "$tmp/pred.json" a 10 0.50 b 20 0.40 c 5 0.1
metrics "$tmp/m1.json" a 9 0.48 b 25 0.45 c 5 0.1
metrics "$tmp/m2.json" a 11 0.52 b 15 0.35
metrics "$tmp/m3.json" a 10.5 0.49 b 22 0.42
python3 "$report" "$tmp/pred.json" "$tmp/m1.json" "$tmp/m2.json" "$tmp/m3.json" >"$tmp/out" 2>"$tmp/err"
checkf "hand-made metrics: exit 0" '[[ $? -eq 0 ]]' "$tmp/err"
check "a: median 10.5, -4.8%, +1.0 pp, 19.0%" 'grep -qE "^a +10.00 ms +10.50 ms +9.0-11.0 +ms +-4.8% +50.0% +49.0% +\+1.0 pp +19.0%" "$tmp/out"'
check "b: median 22, -9.1%, -2.0 pp, 45.5%" 'grep -qE "^b +20.00 ms +22.00 ms +15.0-25.0 +ms +-9.1% +40.0% +42.0% +-2.0 pp +45.5%" "$tmp/out"'
check "c, not in every run, left out" '! grep -q "^c " "$tmp/out"'
check "the summary" 'grep -qF "median |step error| 6.9% (target 5%), largest 9.1% (target 10%), largest |bubble error| 2.0 pp (target 3 pp)" "$tmp/out"'
check "targets not met" 'grep -qx "targets not met" "$tmp/out"'
metrics "$tmp/m4.json" a 10.2 0.50 b 20.5 0.41
python3 "$report" "$tmp/pred.json" "$tmp/m4.json" >"$tmp/out" 2>&1
check "one run within the targets: met" 'grep -qx "targets met" "$tmp/out"'

expect_command_error "no arguments" "usage: scripts/shared_core_report.py PREDICTED.json MEASURED.json" 1 python3 "$report"
expect_command_error "a missing file" "$tmp/none.json: not a stagecraft metrics file" 1 python3 "$report" "$tmp/pred.json" "$tmp/none.json"
metrics "$tmp/zero.json" a 0 0.5
expect_command_error "a zero step" "$tmp/zero.json: schedule a: step time 0.0 ms" 1 python3 "$report" "$tmp/pred.json" "$tmp/zero.json"
metrics "$tmp/other.json" x 1 0.5
expect_command_error "nothing in common" "$tmp/pred.json: no predicted schedule was measured in every run" 1 python3 "$report" "$tmp/pred.json" "$tmp/other.json"

# The whole check, small: every schedule profiled, predicted, executed once and reported.
check_script="$root/scripts/shared-core-check.sh"
expect_command_error "bad rounds" "usage:" 2 "$check_script" x
STAGECRAFT="$sc" SHARED_CORE_OUT="$tmp/run" SHARED_CORE_SETS="--set model.mlp.hidden=64 --set pipeline.steps=3" \
  "$check_script" 1 >"$tmp/run.out" 2>&1
checkf "shared-core-check: exit 0" '[[ $? -eq 0 ]]' "$tmp/run.out"
check "one execution against one prediction" 'grep -qF "1 execution(s) against one prediction" "$tmp/run.out"'
for s in gpipe 1f1b pipedream 2bw interleaved zb-h1 zb-h2 zb-v dualpipe-v; do
  check "a row for $s" 'grep -qE "^$s +[0-9.]+ ms" "$tmp/run.out"'
done
check "the measured ranks name their shared devices" \
  'python3 -c "import json,sys; d=json.load(open(sys.argv[1])); sys.exit(0 if [r[\"device\"] for r in d[\"schedules\"][0][\"per_rank\"]]==[0,0,1,1] else 1)" "$tmp/run/measured1.json"'
exit $fail
