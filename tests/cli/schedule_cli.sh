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
comms="$("$sc" schedule --schedule gpipe --ranks 2 --microbatches 2 --format csv --comms --p2p lockstep)"
check "csv compute_comms has sends" '[[ "$(head -1 <<<"$comms")" == "0F0,0SEND_F0,"* ]]'
# Receives ahead (the default): rank 0 posts both gradient receives before its first forward
# (two buffers), rank 1 both activation receives.
ahead="$("$sc" schedule --schedule gpipe --ranks 2 --microbatches 2 --format csv --comms)"
check "csv ahead: rank 0 receives first" '[[ "$(head -1 <<<"$ahead")" == "0RECV_B0,0RECV_B1,0F0,0SEND_F0,"* ]]'
check "csv ahead: rank 1 receives first" '[[ "$(sed -n 2p <<<"$ahead")" == "1RECV_F0,1RECV_F1,1F0,"* ]]'
json="$("$sc" schedule --schedule zb-h1 --ranks 2 --microbatches 2 --format json)"
check "json has ops" '[[ "$json" == *"\"ops\""* && "$json" == *"\"kind\":\"W\""* ]]'

tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
expect_error "bad --p2p" "--p2p" schedule --schedule gpipe --ranks 2 --microbatches 2 --p2p eager
printf '%s\n' "$csv" >"$tmp/s.csv"
check "csv import round trip" '[[ "$("$sc" schedule --import "$tmp/s.csv" --format csv)" == "$csv" ]]'
printf '0F0,0X1\n' >"$tmp/bad.csv"

# Bad input: one line on stderr, non-zero exit, nothing on stdout.
expect_error "ranks 0" "ranks must be >= 1" schedule --schedule 1f1b --ranks 0 --microbatches 4
expect_error "unknown schedule" "unknown schedule 'nope'" schedule --schedule nope --ranks 2 --microbatches 4
expect_error "interleaved m" "divide into max(1, microbatches / ranks) = 2 rounds" schedule --schedule interleaved --ranks 4 --microbatches 9 --chunks 2
expect_error "chunks on 1f1b" "chunks must be 1" schedule --schedule 1f1b --ranks 4 --microbatches 6 --chunks 2
expect_error "non-number" "--ranks" schedule --schedule 1f1b --ranks abc --microbatches 4
expect_error "bad format" "--format" schedule --schedule 1f1b --ranks 2 --microbatches 4 --format xml
expect_error "malformed csv" "bad.csv:1:2:" schedule --import "$tmp/bad.csv"
expect_error "missing csv" "cannot open" schedule --import "$tmp/none.csv"
exit $fail
