#!/usr/bin/env bash
# `stagecraft schedule` as a user runs it: outputs, and one clear line + non-zero exit on bad input.
set -uo pipefail
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
help="$("$sc" schedule --help)"
check "help cites each generator's paper" '[[ "$help" == *"gpipe        Huang et al., GPipe, NeurIPS 2019"* && "$help" == *"zb-auto "*"Qi et al."* ]]'
json="$("$sc" schedule --schedule zb-h1 --ranks 2 --microbatches 2 --format json)"
check "json has ops" '[[ "$json" == *"\"ops\""* && "$json" == *"\"kind\":\"W\""* ]]'

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
expect_error "missing csv" "$tmp/none.csv: cannot read: no such file or directory" schedule --import "$tmp/none.csv"
expect_error "csv a directory" "$tmp: cannot read: is a directory" schedule --import "$tmp"
truncate -s 257M "$tmp/big.csv"  # sparse
expect_error "csv past its limit" "$tmp/big.csv: larger than 256 MiB, the limit for a schedule CSV" schedule --import "$tmp/big.csv"
expect_error "--relower without --import" "--relower requires --import" schedule --schedule 1f1b --ranks 2 --microbatches 2 --relower

# A schedule that fails validation: one line with the prefix, the count, each code once.
printf '0F0,0F1,0B1,0B0,0F2\n1F1,1F0,1B0\n' >"$tmp/many.csv"
expect_error "invalid schedule" "stagecraft: error: $tmp/many.csv: 4 problem(s): missing: stage 0 step 0 microbatch 2: no backward (B, or I and W); missing: stage 1 step 0 microbatch 1: no backward (B, or I and W); missing: stage 1 step 0 microbatch 2: no F; and 1 more" schedule --import "$tmp/many.csv"
check "invalid schedule: no code word twice" '! grep -qE "(missing|order|deadlock|version|duplicate): (missing|order|deadlock|version|duplicate):" "$tmp/err"'

# The grid's limits (256 rows, 4096 columns), refused before any work; CSV and JSON print any size.
expect_error "grid of too many ranks" \
  "1f1b: a grid of 10000 rows (ranks) by at least 24 columns (time units) is too large to show; the grid shows at most 256 rows by 4096 columns: use --format csv or --format json" \
  schedule --schedule 1f1b --ranks 10000 --microbatches 8
expect_error "grid of too many columns" "by 4097 columns (time units) is too large to show" \
  schedule --schedule zb-h1 --ranks 3 --microbatches 1365
check "grid at the column limit" '"$sc" schedule --schedule zb-h1 --ranks 2 --microbatches 1365 | grep -qx "makespan 4096 units"'
check "grid at the row limit" '[[ $("$sc" schedule --schedule gpipe --ranks 256 --microbatches 1 | grep -c "^rank ") -eq 256 ]]'
check "too many ranks for a grid print as csv" \
  '[[ $("$sc" schedule --schedule gpipe --ranks 300 --microbatches 2 --format csv | wc -l) -eq 300 ]]'

# --explain: each stage's weight delay (PipeDream's stage s of p: p - 1 - s; synchronous: 0).
"$sc" schedule --schedule pipedream --ranks 4 --microbatches 8 --explain >"$tmp/out" 2>"$tmp/err"
checkf "explain: pipedream" '[[ $? -eq 0 ]] && grep -q "^  stage   0: 3 / 3$" "$tmp/out" && grep -q "^  stage   3: 0 / 0$" "$tmp/out"' "$tmp/err"
check "explain: 1f1b is never behind" \
  '[[ $("$sc" schedule --schedule 1f1b --ranks 4 --microbatches 8 --explain | grep -c ": 0 / 0$") -eq 4 ]]'
expect_error "explain with csv" "--explain: prints with the grid (--format grid), not csv" \
  schedule --schedule 1f1b --ranks 2 --microbatches 4 --explain --format csv
exit $fail
