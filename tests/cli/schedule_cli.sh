#!/usr/bin/env bash
# `stagecraft schedule` as a user runs it: outputs, and one clear line + non-zero exit on bad input.
set -uo pipefail
sc="$1"
fail=0
check() { if ! eval "$2"; then echo "FAIL: $1"; fail=1; fi; }

out="$("$sc" schedule --schedule 1f1b --ranks 4 --microbatches 8)"
check "grid header" '[[ "$out" == *"1f1b: 4 ranks, 4 stages, 8 microbatches"* ]]'
check "grid makespan 33" '[[ "$out" == *"makespan 33 units"* ]]'
check "grid rank 0 row" 'grep -q "^rank  0 | F0 F1 F2 F3 " <<<"$out"'

csv="$("$sc" schedule --schedule gpipe --ranks 2 --microbatches 2 --format csv)"
check "csv compute_only" '[[ "$csv" == $'"'"'0F0,0F1,0B0,0B1\n1F0,1F1,1B0,1B1'"'"' ]]'
comms="$("$sc" schedule --schedule gpipe --ranks 2 --microbatches 2 --format csv --comms)"
check "csv compute_comms has sends" '[[ "$(head -1 <<<"$comms")" == "0F0,0SEND_F0,"* ]]'
json="$("$sc" schedule --schedule zb-h1 --ranks 2 --microbatches 2 --format json)"
check "json has ops" '[[ "$json" == *"\"ops\""* && "$json" == *"\"kind\":\"W\""* ]]'

tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
printf '%s\n' "$csv" >"$tmp/s.csv"
check "csv import round trip" '[[ "$("$sc" schedule --import "$tmp/s.csv" --format csv)" == "$csv" ]]'
printf '0F0,0X1\n' >"$tmp/bad.csv"

# Bad input: one line on stderr, non-zero exit, nothing on stdout.
bad() {
  local name="$1"; shift
  local so se rc before=$fail
  fail=0
  so="$("$sc" "$@" 2>"$tmp/err")"; rc=$?
  se="$(cat "$tmp/err")"
  check "$name: non-zero exit" '[[ $rc -ne 0 ]]'
  check "$name: one stderr line" '[[ $(wc -l <"$tmp/err") -eq 1 ]]'
  check "$name: empty stdout" '[[ -z "$so" ]]'
  check "$name: message" '[[ "$se" == *"$EXPECT"* ]]'
  [[ $fail -eq 0 ]] || echo "  stderr was: $se"
  [[ $before -eq 0 ]] || fail=1
}
EXPECT="ranks must be >= 1" bad "ranks 0" schedule --schedule 1f1b --ranks 0 --microbatches 4
EXPECT="unknown schedule 'nope'" bad "unknown schedule" schedule --schedule nope --ranks 2 --microbatches 4
EXPECT="multiple of ranks" bad "interleaved m" schedule --schedule interleaved --ranks 4 --microbatches 6 --chunks 2
EXPECT="chunks must be 1" bad "chunks on 1f1b" schedule --schedule 1f1b --ranks 4 --microbatches 6 --chunks 2
EXPECT="--ranks" bad "non-number" schedule --schedule 1f1b --ranks abc --microbatches 4
EXPECT="--format" bad "bad format" schedule --schedule 1f1b --ranks 2 --microbatches 4 --format xml
EXPECT="bad.csv:1:2:" bad "malformed csv" schedule --import "$tmp/bad.csv"
EXPECT="cannot open" bad "missing csv" schedule --import "$tmp/none.csv"
exit $fail
