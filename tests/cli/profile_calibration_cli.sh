#!/usr/bin/env bash
# `stagecraft profile` under mpirun on pipeline.ranks ranks calibrates: the profile gains the
# input copy, the loss, the overhead per op, a p2p fit, an all-reduce fit and per-rank scales for
# the split the calibration ran with, and the simulator then charges overhead, transfers and the
# replicas' all-reduce from them. On
# one rank (or with --calibration-steps 0) the profile keeps the layers only.
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/cli_lib.bash"
scenario="$root/scenarios/mlp-cpu.yaml"
small=(--set model.mlp.hidden=64 --set pipeline.microbatch_size=16 --set pipeline.steps=2)

"$root/scripts/mpirun.sh" 2 "$sc" profile "$scenario" "${small[@]}" --out "$tmp/p.yaml" --repeats 3 \
  --calibration-steps 3 >"$tmp/out" 2>&1
check "calibrated profile: exit 0" '[[ $? -eq 0 ]]'
check "prints the p2p fit" 'grep -qE "^p2p: latency .*, bandwidth [0-9.]+ GB/s, [0-9]+% of a 4.00 KiB transfer" "$tmp/out"'
check "prints the all-reduce fit" 'grep -qE "^all-reduce over 2 ranks: 2 steps of .* latency, bus bandwidth [0-9.]+ GB/s" "$tmp/out"'
check "prints the scales of both ranks" '[[ $(grep -cE "^[01] +per (step|microbatch) " "$tmp/out") -eq 4 ]]'
check "prints both ranks' stash slopes" '[[ $(grep -cE "^rank [01]: up to [0-9.]+:" "$tmp/out") -eq 2 ]]'
check "the profile holds both ranks' stash, GPipe's 8 microbatches deep" \
  '[[ $(grep -cE "^    stash: \{deep: 8\.0000, forward: \{at: [0-9.]+, slope: [0-9.]+\}" "$tmp/p.yaml") -eq 2 ]]'

# A device with room for 1F1B (336 KiB) but not for GPipe's 8 microbatches at once (556 KiB):
# the deep run is left out and said so, the stash unmeasured, the profile still written.
"$root/scripts/mpirun.sh" 2 "$sc" profile "$scenario" "${small[@]}" --set topology.device.memory=400KiB \
  --out "$tmp/tight.yaml" --repeats 3 --calibration-steps 3 >"$tmp/tight" 2>&1
check "tight memory: exit 0" '[[ $? -eq 0 ]]'
check "tight memory: GPipe's run left out, said so" 'grep -q "^gpipe.s run left out: every microbatch held at once is predicted over the device.s memory" "$tmp/tight"'
check "tight memory: no stash in the profile" '! grep -q "stash:" "$tmp/tight.yaml" && grep -q "per_step:" "$tmp/tight.yaml"'
python3 - "$tmp/p.yaml" <<'PY' || fail=1
import re, sys
text = open(sys.argv[1]).read()
def ns(key):
    m = re.search(rf"^{key}: (\d+)ns$", text, re.M)
    return int(m.group(1)) if m else -1
ok = ns("input_copy") > 0 and ns("loss") > 0 and ns("op_overhead") >= 0
p2p = re.search(r"^p2p: \{latency: (\d+)ns, bandwidth: (\d+)B/s, overlap: ([0-9.]+)"
                r"(?:, in_pipeline_bandwidth: (\d+)B/s)?\}$", text, re.M)
ok &= p2p is not None and int(p2p.group(2)) > 0 and 0 <= float(p2p.group(3)) <= 1
# The pipeline's bandwidth, when kept, is below the ping-pong's.
ok &= p2p is not None and (p2p.group(4) is None or 0 < int(p2p.group(4)) < int(p2p.group(2)))
# Two calibration ranks, each with the 4 of the 8 layers it held and positive scales.
ok &= re.findall(r"^  - layers: (\d+)$", text, re.M) == ["4", "4"]
scales = [float(x) for x in re.findall(r"(?:forward|backward|backward_input|backward_weight|step): ([0-9.]+)[,}]",
                                        text.split("\nranks:")[1])] if "\nranks:" in text else []
ok &= len(scales) == 2 * 2 * 5 and all(x > 0 for x in scales)
# The all-reduce over the job's 2 ranks: a latency and a positive bus bandwidth.
ok &= re.search(r"^allreduce: \{latency: \d+ns, bus_bandwidth: [1-9]\d*B/s, ranks: 2\}$", text, re.M) is not None
if not ok:
    print("FAIL: calibrated profile content\n" + text)
sys.exit(0 if ok else 1)
PY

# The simulator charges the calibrated overhead: every rank's overhead_ms is positive when the
# profile's op_overhead is, and zero with the layers-only profile below.
"$sc" simulate "$scenario" "${small[@]}" --set pipeline.schedule=1f1b --set model.profile="$tmp/p.yaml" \
  --json "$tmp/sim.json" >/dev/null 2>&1
check "simulate from the calibrated profile: exit 0" '[[ $? -eq 0 ]]'
python3 - "$tmp/p.yaml" "$tmp/sim.json" <<'PY' || fail=1
import json, re, sys
overhead_ns = int(re.search(r"^op_overhead: (\d+)ns$", open(sys.argv[1]).read(), re.M).group(1))
ranks = json.load(open(sys.argv[2]))["schedules"][0]["per_rank"]
ok = all((r["overhead_ms"] > 0) == (overhead_ns > 0) for r in ranks)
ok &= all(abs(r["compute_ms"] + r["wait_ms"] + r["transfer_ms"] + r["overhead_ms"] + r["idle_ms"]
              - json.load(open(sys.argv[2]))["schedules"][0]["makespan_ms"]) < 1e-3 for r in ranks)
if not ok:
    print(f"FAIL: simulated overhead with op_overhead {overhead_ns} ns: {ranks}")
sys.exit(0 if ok else 1)
PY

# Two replicas of the whole model (P = 1 x D = 2): each REDUCE_GRAD takes what the fit says,
# 2 x latency + 2(2-1)/2 x the model's gradients (8 layers of 64 x 64 + 64 floats: 133120 bytes)
# / bus bandwidth, and the STEP right after the last backward waits all of it: collective_ms is
# that for each of the 2 steps (within 1%, for the run's op overheads and rounding).
"$sc" simulate "$scenario" "${small[@]}" --set pipeline.schedule=1f1b --set pipeline.ranks=1 \
  --set pipeline.data_parallel=2 --set model.profile="$tmp/p.yaml" --json "$tmp/dp.json" >/dev/null 2>&1
check "simulate two replicas from the calibrated profile: exit 0" '[[ $? -eq 0 ]]'
python3 - "$tmp/p.yaml" "$tmp/dp.json" <<'PY' || fail=1
import json, re, sys
fit = re.search(r"^allreduce: \{latency: (\d+)ns, bus_bandwidth: (\d+)B/s", open(sys.argv[1]).read(), re.M)
reduce_ms = (2 * int(fit.group(1)) + 133120 / int(fit.group(2)) * 1e9) / 1e6
got = json.load(open(sys.argv[2]))["schedules"][0]["per_rank"][0]["collective_ms"]
if abs(got - 2 * reduce_ms) > 0.01 * 2 * reduce_ms:
    print(f"FAIL: collective_ms {got}, the fit says 2 x {reduce_ms}")
    sys.exit(1)
PY

# The replicated layout itself (pipeline.ranks 1 x data_parallel 2 on 2 ranks): the layers are
# timed with both replicas computing, and the calibration runs are the job's, REDUCE_GRADs and all.
"$root/scripts/mpirun.sh" 2 "$sc" profile "$scenario" "${small[@]}" --set pipeline.ranks=1 \
  --set pipeline.data_parallel=2 --out "$tmp/dp.yaml" --repeats 3 --calibration-steps 3 >"$tmp/dp" 2>&1
check "replicated profile: exit 0" '[[ $? -eq 0 ]]'
check "replicated profile: timed on 2 ranks at once" 'grep -q "on 2 rank(s) at once" "$tmp/dp"'
check "replicated profile: the runs' all-reduces" 'grep -qE "^all-reduce in the runs: [1-9][0-9]* REDUCE_GRADs, median" "$tmp/dp"'
check "replicated profile: one rank of all 8 layers, scaled" \
  'grep -qE "^  - layers: 8$" "$tmp/dp.yaml" && grep -qE "^0 +per step " "$tmp/dp"'
check "replicated profile: the fit over the 2 replicas" \
  'grep -qE "^allreduce: \{latency: [0-9]+ns, bus_bandwidth: [1-9][0-9]*B/s, ranks: 2" "$tmp/dp.yaml"'

"$sc" profile "$scenario" "${small[@]}" --out "$tmp/one.yaml" --repeats 3 >"$tmp/one" 2>&1
check "one rank: exit 0" '[[ $? -eq 0 ]]'
check "one rank: says it is not calibrated" 'grep -q "^not calibrated (run it on pipeline.ranks x pipeline.data_parallel MPI ranks" "$tmp/one"'
check "one rank: no calibration keys" '! grep -qE "^(op_overhead|p2p|allreduce|ranks):" "$tmp/one.yaml"'
"$sc" simulate "$scenario" "${small[@]}" --set pipeline.schedule=1f1b --set model.profile="$tmp/one.yaml" \
  --json "$tmp/one.json" >/dev/null 2>&1
check "layers only: no overhead predicted" \
  'python3 -c "import json,sys; sys.exit(any(r[\"overhead_ms\"] != 0 for r in json.load(open(\"$tmp/one.json\"))[\"schedules\"][0][\"per_rank\"]))"'

# Ranks that share a device (4 ranks, 2 per device, on 2 devices): the layers are timed in two
# turns (each device's ranks one after the other), every rank meets the turns' barriers, and
# the calibration still covers all four ranks.
"$root/scripts/mpirun.sh" 4 "$sc" profile "$scenario" "${small[@]}" --set pipeline.ranks=4 \
  --set pipeline.ranks_per_device=2 --set topology.devices_per_node=2 --out "$tmp/shared.yaml" --repeats 3 \
  --calibration-steps 3 >"$tmp/shared" 2>&1
check "shared devices: exit 0" '[[ $? -eq 0 ]]'
check "shared devices: the scales of all four ranks" '[[ $(grep -cE "^[0-3] +per (step|microbatch) " "$tmp/shared") -eq 8 ]]'
check "shared devices: every layer timed" '[[ $(grep -cE "^  - \{forward: [0-9]+ns" "$tmp/shared.yaml") -eq 8 ]]'
exit $fail
