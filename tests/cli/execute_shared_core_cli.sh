#!/usr/bin/env bash
# tools/stagecraft_tools/shared_core.py on hand-made rounds whose medians and errors are worked out
# here, its bad input one line each; then scripts/shared-core-check.sh end to end at a small
# shape (4 ranks on 2 devices: one round of profile, simulate and execute, the report).
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/cli_lib.bash"
report="$root/scripts/tool.sh"

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
# Three rounds, each its prediction and its measurement:
# a: 10 / 9 - 1 = +11.1%, 10.5 / 11 - 1 = -4.5%, 9.6 / 10.5 - 1 = -8.6% -> median -4.5%, range
#    -8.6..+11.1; bubble +2, -2, 0 pp -> 0.0; measured 9, 11, 10.5 -> 10.5 ms, (11 - 9) / 10.5 = 19.0%.
# b: 20 / 25 - 1 = -20%, 18 / 15 - 1 = +20%, 0% -> median 0.0%; bubble -5, +3, -2 -> -2.0 pp;
#    measured 25, 15, 22 -> 22 ms, 45.5%. c is in round 1 only: left out.
# Median |error| (4.5 + 0.0) / 2 = 2.3%, largest 4.5%, bubble 2.0 pp: the targets met.
for k in 1 2 3; do mkdir -p "$tmp/r$k"; done
metrics "$tmp/r1/predicted.json" a 10 0.50 b 20 0.40 c 5 0.1
metrics "$tmp/r1/measured.json" a 9 0.48 b 25 0.45 c 5 0.1
metrics "$tmp/r2/predicted.json" a 10.5 0.50 b 18 0.38
metrics "$tmp/r2/measured.json" a 11 0.52 b 15 0.35
metrics "$tmp/r3/predicted.json" a 9.6 0.49 b 22 0.40
metrics "$tmp/r3/measured.json" a 10.5 0.49 b 22 0.42
"$report" shared_core "$tmp/r1" "$tmp/r2" "$tmp/r3" >"$tmp/out" 2>"$tmp/err"
checkf "hand-made rounds: exit 0" '[[ $? -eq 0 ]]' "$tmp/err"
check "a: -4.5%, -8.6..+11.1, 0.0 pp, 10.5 ms, 19.0%" 'grep -qE "^a +-4.5% +-8.6\.\.\+11.1 +\+0.0 pp +10.50 ms +19.0%" "$tmp/out"'
check "b: 0.0%, -20..+20, -2.0 pp, 22 ms, 45.5%" 'grep -qE "^b +\+0.0% +-20.0\.\.\+20.0 +-2.0 pp +22.00 ms +45.5%" "$tmp/out"'
check "c, not in every round, left out" '! grep -q "^c " "$tmp/out"'
check "the summary" 'grep -qF "median |step error| 2.3% (target 5%), largest 4.5% (target 10%), largest |bubble error| 2.0 pp (target 3 pp)" "$tmp/out"'
check "targets met" 'grep -qx "targets met" "$tmp/out"'
"$report" shared_core "$tmp/r1" >"$tmp/out" 2>&1
check "round 1 alone (+11.1%, -20%): not met" 'grep -qx "targets not met" "$tmp/out"'

expect_command_error "no arguments" "usage: scripts/tool.sh shared_core ROUND_DIR" 1 "$report" shared_core
mkdir -p "$tmp/half"; cp "$tmp/r1/predicted.json" "$tmp/half/"
expect_command_error "a round without its measurement" "$tmp/half/measured.json: not a stagecraft metrics file" 1 \
  "$report" shared_core "$tmp/r1" "$tmp/half"
mkdir -p "$tmp/zero"; cp "$tmp/r1/predicted.json" "$tmp/zero/"; metrics "$tmp/zero/measured.json" a 0 0.5
expect_command_error "a zero step" "$tmp/zero/measured.json: schedule a: step time 0.0 ms" 1 "$report" shared_core "$tmp/zero"
mkdir -p "$tmp/other"; cp "$tmp/r1/predicted.json" "$tmp/other/"; metrics "$tmp/other/measured.json" x 1 0.5
expect_command_error "nothing in common" "$tmp/other: no schedule was predicted and measured in every round" 1 \
  "$report" shared_core "$tmp/other"

# The whole check, small: every schedule profiled, predicted, executed once and reported.
check_script="$root/scripts/shared-core-check.sh"
expect_command_error "bad rounds" "usage:" 2 "$check_script" x
STAGECRAFT="$sc" SHARED_CORE_OUT="$tmp/run" SHARED_CORE_SETS="--set model.mlp.hidden=64 --set pipeline.steps=3" \
  "$check_script" 1 >"$tmp/run.out" 2>&1
checkf "shared-core-check: exit 0" '[[ $? -eq 0 ]]' "$tmp/run.out"
check "one round" 'grep -qF "1 round(s) of profile, prediction and execution" "$tmp/run.out"'
for s in gpipe 1f1b pipedream 2bw interleaved zb-h1 zb-h2 zb-v dualpipe-v; do
  check "a row for $s" 'grep -qE "^$s +[-+][0-9.]+% " "$tmp/run.out"'
done
check "the measured ranks name their shared devices" \
  'python3 -c "import json,sys; d=json.load(open(sys.argv[1])); sys.exit(0 if [r[\"device\"] for r in d[\"schedules\"][0][\"per_rank\"]]==[0,0,1,1] else 1)" "$tmp/run/round1/measured.json"'
exit $fail
