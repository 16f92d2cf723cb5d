#!/usr/bin/env bash
# A scenario naming a schedule file (pipeline.schedule: [1f1b, order.csv], the file relative to
# the scenario): simulate and execute run it beside the generator, under the file's name, its V
# placement inferred and its one step repeated; with flush weights it trains exactly as 1F1B does
# (the same math in another order: the same losses). Bad files: one line naming the file, no output.
# `schedule --import` keeps a file's own transfers and validates them as they are, as simulate
# does; --relower drops them and lowers the compute order again.
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/cli_lib.bash"
mkdir -p "$tmp/orders"
# GPipe's order down the V and back, p = 2, m = 2, as PyTorch writes it (with a sharding action).
printf '0F0,0F1,3F0,3F1,3B0,3B1,0B0,0B1\n1UNSHARD,1F0,1F1,2F0,2F1,2B0,2B1,1B0,1B1\n' >"$tmp/orders/v.csv"
sed -e 's/^  schedule: all/  schedule: [1f1b, orders\/v.csv]/' -e 's/^  microbatches: 8/  microbatches: 2/' \
    -e 's/^  steps: 20/  steps: 3/' "$root/scenarios/mlp-cpu.yaml" >"$tmp/s.yaml"

"$sc" simulate "$tmp/s.yaml" --json "$tmp/p.json" --trace "$tmp/p.trace.json" >"$tmp/out" 2>"$tmp/err"
check "simulate: exit 0" '[[ $? -eq 0 ]]'
check "simulate: the file's schedule by its name" 'grep -q "^orders/v.csv " "$tmp/out"'
check "simulate: its trace under a file name of it" '[[ -s "$tmp/p.trace.orders_v.csv.json" ]]'
timeout 120 "$root/scripts/mpirun.sh" 2 "$sc" execute "$tmp/s.yaml" --json "$tmp/m.json" >"$tmp/out" 2>"$tmp/err"
check "execute: exit 0" '[[ $? -eq 0 ]]'
"$sc" compare "$tmp/p.json" "$tmp/m.json" >"$tmp/compare" 2>&1
check "compare: exit 0 and the file's row" '[[ $? -eq 0 ]] && grep -q "^orders/v.csv " "$tmp/compare"'
python3 - "$tmp" <<'PY' || fail=1
import json, sys
m = {s["schedule"]: s for s in json.load(open(sys.argv[1] + "/m.json"))["schedules"]}
v, ref = m.get("orders/v.csv"), m.get("1f1b")
ok = v is not None and ref is not None and len(v["losses"]) == 3
ok = ok and all(abs(a - b) <= 1e-6 * abs(b) for a, b in zip(v["losses"], ref["losses"]))
if not ok:
    print("FAIL: the V file trains as 1f1b does:", v and v["losses"], ref and ref["losses"])
sys.exit(0 if ok else 1)
PY

# With 2 replicas the file's schedule has them as a generated one does: a REDUCE_GRAD per STEP
# (4 stages x 3 steps, on the trace's collective stream) and a throughput that counts both
# replicas' samples: 2 microbatches x 64 samples x 2 replicas x 3 steps over the makespan.
"$sc" simulate "$tmp/s.yaml" --set pipeline.data_parallel=2 --set topology.devices_per_node=4 --json "$tmp/dp.json" \
  --trace "$tmp/dp.trace.json" >/dev/null
check "replicas: the file's REDUCE_GRADs on the collective stream" \
  '[[ $(grep -c "\"cat\":\"REDUCE_GRAD\",\"pid\":[0-9]*,\"tid\":3," "$tmp/dp.trace.orders_v.csv.json") -eq 12 ]]'
check "replicas: the file's throughput counts both replicas" "python3 - \"\$tmp/dp.json\" <<'PY'
import json, sys
v = {s['schedule']: s for s in json.load(open(sys.argv[1]))['schedules']}['orders/v.csv']
assert v['data_parallel'] == 2, v
assert abs(v['throughput_samples_per_s'] - 2 * 64 * 2 * 3 / (v['makespan_ms'] / 1000)) < 1e-3 * v['throughput_samples_per_s'], v
PY"
# Bad files.
printf '0F0,0F1,0B0,0B1\n' >"$tmp/orders/one-rank.csv"
sed 's/orders\/v.csv/orders\/one-rank.csv/' "$tmp/s.yaml" >"$tmp/one.yaml"
expect_error "a file with other ranks" "one-rank.csv: 1 rows (ranks), but pipeline.ranks is 2" simulate "$tmp/one.yaml"
printf '0F0,0F1,3F0,3F1,3B0,3B1,0B0,0B1\n1F0,1F1,2F0,2F1,2B0,2B1,1B0\n' >"$tmp/orders/short.csv"
sed 's/orders\/v.csv/orders\/short.csv/' "$tmp/s.yaml" >"$tmp/short.yaml"
expect_error "a file missing a backward" "cannot lower orders/short.csv: rank 0 waits forever at 0B1" simulate "$tmp/short.yaml" \
  --json "$tmp/short.json"
check "no JSON after a bad file" '[[ ! -e "$tmp/short.json" ]]'
sed 's/orders\/v.csv/orders\/none.csv/' "$tmp/s.yaml" >"$tmp/none.yaml"
expect_error "a missing file" "orders/none.csv: cannot read: no such file or directory" simulate "$tmp/none.yaml"

# ---- schedule --import of a compute_comms file: its transfers are kept -------------------------
# 1F1B, p = 2, m = 2, in PyTorch's lockstep order (the default lowering posts receives ahead).
printf '0F0,0SEND_F0,0F1,0SEND_F1,0RECV_B0,0B0,0RECV_B1,0B1\n1RECV_F0,1F0,1RECV_F1,1B0,1SEND_B0,1F1,1B1,1SEND_B1\n' \
  >"$tmp/orders/comms.csv"
grid="$("$sc" schedule --import "$tmp/orders/comms.csv" 2>"$tmp/err")"; rc=$?
check "valid transfers: exit 0" '[[ $rc -eq 0 && ! -s "$tmp/err" ]]'
check "valid transfers: the grid as with --relower" \
  '[[ -n "$grid" && "$grid" == "$("$sc" schedule --import "$tmp/orders/comms.csv" --relower)" ]]'
check "valid transfers: the grid" 'grep -q "^rank  1 | .  F0 B0 B0 F1 B1 B1 .  .  |" <<<"$grid"'
check "valid transfers: printed as the file has them" \
  '[[ "$("$sc" schedule --import "$tmp/orders/comms.csv" --format csv --comms)" == "$(cat "$tmp/orders/comms.csv")" ]]'
check "--relower: lowered again (receives ahead)" \
  '[[ "$("$sc" schedule --import "$tmp/orders/comms.csv" --relower --format csv --comms | sed -n 2p)" == 1RECV_F0,1RECV_F1,1F0,* ]]'
expect_error "--p2p on a file with transfers" "comms.csv: --p2p applies only to lowering, and the file carries its own transfers (SEND/RECV); add --relower" \
  schedule --import "$tmp/orders/comms.csv" --p2p lockstep

# A RECV moved after its consumer, and a SEND removed: refused as they are, lowered again with --relower.
printf '0F0,0SEND_F0,0F1,0SEND_F1,0RECV_B0,0B0,0RECV_B1,0B1\n1F0,1RECV_F0,1RECV_F1,1B0,1SEND_B0,1F1,1B1,1SEND_B1\n' \
  >"$tmp/orders/late.csv"
printf '0F0,0SEND_F0,0F1,0RECV_B0,0B0,0RECV_B1,0B1\n1RECV_F0,1F0,1RECV_F1,1B0,1SEND_B0,1F1,1B1,1SEND_B1\n' \
  >"$tmp/orders/nosend.csv"
expect_error "a RECV after its consumer" \
  "stagecraft: error: $tmp/orders/late.csv: 1 problem(s): order: rank 1 #1 (1RECV_F0) posted after its consumer rank 1 #0 (1F0)" \
  schedule --import "$tmp/orders/late.csv"
expect_error "a SEND removed" \
  "stagecraft: error: $tmp/orders/nosend.csv: 1 problem(s): missing: step 0 microbatch 1: no SEND of activations from stage 0 to stage 1" \
  schedule --import "$tmp/orders/nosend.csv" --format json
for f in late nosend; do
  check "$f.csv --relower: exit 0, the valid grid" \
    '[[ "$("$sc" schedule --import "$tmp/orders/$f.csv" --relower 2>/dev/null | tail -n +2)" == "$(tail -n +2 <<<"$grid")" ]]'
done
# simulate refuses the same file.
sed 's/orders\/v.csv/orders\/late.csv/' "$tmp/s.yaml" >"$tmp/late.yaml"
expect_error "simulate refuses it too" "late.csv: not a valid schedule for 2 microbatches: 1 problem(s): order: rank 1 #1 (1RECV_F0) posted after its consumer" simulate "$tmp/late.yaml"
exit $fail
