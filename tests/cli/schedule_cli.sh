#!/usr/bin/env bash
# `stagecraft schedule` as a user runs it: outputs, and one clear line + non-zero exit on bad input.
set -uo pipefail
sc="$1"
source "$(dirname "${BASH_SOURCE[0]}")/cli_lib.bash"

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
expect_error "ranks 0" "ranks must be >= 1" schedule --schedule 1f1b --ranks 0 --microbatches 4
expect_error "unknown schedule" "unknown schedule 'nope'" schedule --schedule nope --ranks 2 --microbatches 4
expect_error "interleaved m" "multiple of ranks" schedule --schedule interleaved --ranks 4 --microbatches 6 --chunks 2
expect_error "chunks on 1f1b" "chunks must be 1" schedule --schedule 1f1b --ranks 4 --microbatches 6 --chunks 2
expect_error "non-number" "--ranks" schedule --schedule 1f1b --ranks abc --microbatches 4
expect_error "bad format" "--format" schedule --schedule 1f1b --ranks 2 --microbatches 4 --format xml
expect_error "malformed csv" "bad.csv:1:2:" schedule --import "$tmp/bad.csv"
expect_error "missing csv" "cannot open" schedule --import "$tmp/none.csv"
exit $fail
