#!/usr/bin/env bash
# scripts/trace-gaps.sh: the gaps before a trace's compute ops, by op kind and by whether a
# receive completed inside them, on a hand-made trace whose gaps are worked out here; bad input
# one line each.
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/cli_lib.bash"
tg="$root/scripts/trace-gaps.sh"

# One rank, one step. RECV_F 0-10 feeds F0 (12-32, the first op: no gap before it); RECV_B 5-35
# ends inside the next gap (32 to F1's start at 40: 8 us, one receive); B0, fed by it, follows
# F1's end at 50 and starts at 55 (5 us, none); W0 at 66 after B0's end at 65 (1 us, none);
# F2 at 84, fed by a RECV_F that ends at 80, after W0's end at 70 (4 us from the arrival, none).
# By kind: F 8 and 4, B 5, W 1; by receives: none 3 x mean 3.33, one 1 x 8; beyond a gap without
# one: 8 - 3.33 = 4.67 us over one rank and one step, 0.005 ms.
ev() { printf '{"ph": "X", "name": "x", "pid": 0, "tid": %s, "ts": %s, "dur": %s, "args": {"kind": "%s", "stage": 0, "microbatch": %s, "step": 0, "version": 0, "op_index": %s}}' "$@"; }
{
  echo '{"traceEvents": ['
  ev 2 0 10 RECV_F 0 0; echo ,; ev 0 12 20 F 0 1; echo ,; ev 2 5 30 RECV_B 0 2; echo ,
  ev 0 40 10 F 1 3; echo ,; ev 0 55 10 B 0 4; echo ,; ev 0 66 4 W 0 5; echo ,
  ev 2 60 20 RECV_F 2 6; echo ,; ev 0 84 5 F 2 7
  echo '], "stagecraft": {"source": "measured"}}'
} >"$tmp/t.json"
"$tg" "$tmp/t.json" >"$tmp/out" 2>"$tmp/err"
checkf "a hand-made trace: exit 0" '[[ $? -eq 0 ]]' "$tmp/err"
for want in "4 gaps over 1 rank(s) and 1 step(s), mean 4.5 us" \
            "by the op after the gap: F 2 x mean 6.0 / median 6.0 us, B 1 x mean 5.0 / median 5.0 us, W 1 x mean 1.0 / median 1.0 us" \
            "by receives completed inside the gap: 0: 3 x mean 3.3 us, 1: 1 x mean 8.0 us" \
            "beyond a gap without one: 0.005 ms per rank and step"; do
  check "a hand-made trace: '$want'" 'grep -qF -- "$want" "$tmp/out"'
done

expect_command_error "no trace" "usage: scripts/trace-gaps.sh TRACE.json..." "" "$tg"
expect_command_error "a missing file" "$tmp/none.json: not a stagecraft trace" "" "$tg" "$tmp/none.json"
echo '{"traceEvents": [{"ph": "X", "ts": 1}]}' >"$tmp/bad.json"
expect_command_error "an event without args" "$tmp/bad.json: not a stagecraft trace" "" "$tg" "$tmp/bad.json"
echo '{"traceEvents": []}' >"$tmp/empty.json"
expect_command_error "no compute ops" "$tmp/empty.json: no gap between two compute ops" "" "$tg" "$tmp/empty.json"
exit $fail
