#!/usr/bin/env bash
# `stagecraft execute` with pipeline.offload.activations on the cpu backend, as a user runs it:
# the scenario's device memory is a hard limit, GPipe's 8 microbatches in flight do not fit it
# (refused before any rank allocates), all of them offloaded to the host do, and that run trains
# to exactly the losses of the reference run without copies or limit, with every copy timed on
# its own lane and the host memory reported beside the device's, as predicted; the optimizer on
# the host fits it too, to the same losses; spilled weights (interleaved's stages taking turns, and
# Hydra's spilled schedule on one rank) train to the losses of the same runs with all resident.
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/cli_lib.bash"
mpi="$root/scripts/mpirun.sh"
scenario="$root/scenarios/mlp-cpu.yaml"
job=(--set pipeline.schedule=gpipe --set pipeline.steps=3 --set topology.host.memory=8GiB
     --set topology.host.bandwidth=10GB/s --set topology.host.latency=5us)

timeout 300 "$mpi" 2 "$sc" execute "$scenario" "${job[@]}" --json "$tmp/ref.json" >"$tmp/out" 2>"$tmp/err"
checkf "reference run: exit 0" '[[ $? -eq 0 ]]' "$tmp/err"

# 22 MiB: GPipe holds about 25 MiB per rank without copies (its weights, gradients and Adam state
# 16 MiB, and 8 stashes), about 19.5 MiB with every stash offloaded.
small=(--set topology.device.memory=22MiB)
timeout 300 "$mpi" 2 "$sc" execute "$scenario" "${job[@]}" "${small[@]}" --json "$tmp/plain.json" >"$tmp/out" 2>"$tmp/err"
rc=$?
check "without offload: refused" '[[ $rc -ne 0 ]]'
check "without offload: one line naming the device memory" \
  '[[ $(wc -l <"$tmp/err") -eq 1 ]] && grep -q "predicted to exceed the device memory of 22.00 MiB (topology.device.memory)" "$tmp/err"'
check "without offload: no output" '[[ ! -e "$tmp/plain.json" ]]'

off=(--set pipeline.offload.activations=1)
timeout 300 "$mpi" 2 "$sc" execute "$scenario" "${job[@]}" "${small[@]}" "${off[@]}" --json "$tmp/off.json" \
  --trace "$tmp/off.trace.json" >"$tmp/out" 2>"$tmp/err"
checkf "with offload: exit 0" '[[ $? -eq 0 ]]' "$tmp/err"
"$sc" simulate "$scenario" "${job[@]}" "${small[@]}" "${off[@]}" --json "$tmp/pred.json" >/dev/null 2>"$tmp/err"
checkf "with offload: simulated" '[[ $? -eq 0 ]]' "$tmp/err"
python3 - "$tmp" <<'PY' || fail=1
import json, sys
tmp = sys.argv[1]
ok = True
def need(cond, what):
    global ok
    if not cond:
        print("FAIL:", what); ok = False
ref = json.load(open(f"{tmp}/ref.json"))["schedules"][0]
off = json.load(open(f"{tmp}/off.json"))["schedules"][0]
pred = json.load(open(f"{tmp}/pred.json"))["schedules"][0]
need(off["losses"] == ref["losses"], f"the same losses: {off['losses']} vs {ref['losses']}")
need("peak_host_memory_bytes" not in ref["per_rank"][0], "no host memory without copies")
for m, p in zip(off["per_rank"], pred["per_rank"]):
    r = m["rank"]
    need(m["peak_memory_bytes"] <= 22 << 20, f"rank {r}: under the limit ({m['peak_memory_bytes']})")
    need(abs(m["peak_memory_bytes"] / p["peak_memory_bytes"] - 1) < 0.1,
         f"rank {r}: device peak {m['peak_memory_bytes']} within 10% of the predicted {p['peak_memory_bytes']}")
    need(m["peak_host_memory_bytes"] > 0 and abs(m["peak_host_memory_bytes"] / p["peak_host_memory_bytes"] - 1) < 0.15,
         f"rank {r}: host peak {m['peak_host_memory_bytes']} within 15% of the predicted {p['peak_host_memory_bytes']}")
    need(m["offload_wait_ms"] >= 0, f"rank {r}: offload wait reported")
    parts = sum(m[k] for k in ("compute_ms", "wait_ms", "transfer_ms", "offload_wait_ms", "overhead_ms", "idle_ms"))
    need(abs(parts - off["makespan_ms"]) < 1e-3, f"rank {r}: the split sums to the makespan ({parts})")
events = json.load(open(f"{tmp}/off.trace.json"))["traceEvents"]
copies = [e for e in events if e.get("ph") == "X" and ("OFFLOAD" in e["name"] or "RELOAD" in e["name"])]
need(len(copies) == 2 * 2 * 8 * 3, f"every copy timed: {len(copies)}")
need(all((e["tid"] == 4) == ("OFFLOAD" in e["name"]) for e in copies), "offloads on lane 4, reloads on lane 5")
need(all(e["dur"] >= 0 for e in copies), "durations")
sys.exit(0 if ok else 1)
PY

# The optimizer on the host (ZeRO-Offload): GPipe's Adam state (8 MiB per rank) leaves the device,
# so the same 22 MiB limit holds the run without offloading any activation, to the same losses.
# run_and_predict NAME OUT ARGS...: executes the job with ARGS on 2 ranks into $tmp/OUT.json and
# simulates it into $tmp/OUT-pred.json.
run_and_predict() {
  local name="$1" out="$2"; shift 2
  timeout 300 "$mpi" 2 "$sc" execute "$scenario" "${job[@]}" "$@" --json "$tmp/$out.json" >"$tmp/out" 2>"$tmp/err"
  checkf "$name: exit 0" '[[ $? -eq 0 ]]' "$tmp/err"
  "$sc" simulate "$scenario" "${job[@]}" "$@" --json "$tmp/$out-pred.json" >/dev/null 2>"$tmp/err"
  checkf "$name: simulated" '[[ $? -eq 0 ]]' "$tmp/err"
}
run_and_predict "optimizer on the host" opt "${small[@]}" --set pipeline.offload.optimizer=host
python3 - "$tmp" <<'PY' || fail=1
import json, sys
tmp = sys.argv[1]
ref = json.load(open(f"{tmp}/ref.json"))["schedules"][0]
run = json.load(open(f"{tmp}/opt.json"))["schedules"][0]
pred = json.load(open(f"{tmp}/opt-pred.json"))["schedules"][0]
bad = []
if run["losses"] != ref["losses"]:
    bad.append(f"losses {run['losses']} vs {ref['losses']}")
for m, p in zip(run["per_rank"], pred["per_rank"]):
    if not m["peak_memory_bytes"] <= 22 << 20:
        bad.append(f"rank {m['rank']}: device peak {m['peak_memory_bytes']} over the limit")
    if abs(m["peak_memory_bytes"] / p["peak_memory_bytes"] - 1) > 0.1:
        bad.append(f"rank {m['rank']}: device peak {m['peak_memory_bytes']} vs predicted {p['peak_memory_bytes']}")
    if abs(m["peak_host_memory_bytes"] / p["peak_host_memory_bytes"] - 1) > 0.1:
        bad.append(f"rank {m['rank']}: host peak {m['peak_host_memory_bytes']} vs predicted {p['peak_host_memory_bytes']}")
for b in bad:
    print("FAIL: optimizer on the host:", b)
sys.exit(1 if bad else 0)
PY

# Spilled weights: interleaved's two stages per rank take turns on the device, each brought in from
# the host for its visit and sent back after, to the same losses as with both resident; the peaks
# as predicted.
inter=(--set pipeline.schedule=interleaved)
run_and_predict "interleaved, resident" inter "${inter[@]}"
run_and_predict "interleaved, spilled" spill "${inter[@]}" --set pipeline.offload.weights=spill

# Hydra's spilled schedule on one rank: the whole model (8 layers with Adam, 36 MiB with GPipe's
# stashes) does not fit 24 MiB; cut into 4 shards that take turns (two on the device at once, double
# buffered), it trains there to GPipe's losses.
one=(--set pipeline.ranks=1 --set pipeline.steps=2 --set topology.device.memory=24MiB --set pipeline.recompute=full)
timeout 300 "$mpi" 1 "$sc" execute "$scenario" "${job[@]}" "${one[@]}" --json "$tmp/whole.json" >"$tmp/out" 2>"$tmp/err"
rc=$?
check "one rank, whole model: refused" '[[ $rc -ne 0 ]]'
check "one rank, whole model: one line naming the device memory" \
  '[[ $(wc -l <"$tmp/err") -eq 1 ]] && grep -q "topology.device.memory" "$tmp/err"'
timeout 300 "$mpi" 1 "$sc" execute "$scenario" "${job[@]}" "${one[@]}" --set topology.device.memory=1GiB \
  --json "$tmp/whole.json" >"$tmp/out" 2>"$tmp/err"
checkf "one rank, whole model with room: exit 0" '[[ $? -eq 0 ]]' "$tmp/err"
timeout 300 "$mpi" 1 "$sc" execute "$scenario" "${job[@]}" "${one[@]}" --set pipeline.schedule=spilled \
  --set pipeline.chunks=4 --json "$tmp/shards.json" >"$tmp/out" 2>"$tmp/err"
checkf "one rank, spilled shards: exit 0" '[[ $? -eq 0 ]]' "$tmp/err"
python3 - "$tmp" <<'PY' || fail=1
import json, sys
tmp = sys.argv[1]
load = lambda name: json.load(open(f"{tmp}/{name}.json"))["schedules"][0]
bad = []
inter, spill, pred, inter_pred = load("inter"), load("spill"), load("spill-pred"), load("inter-pred")
if spill["losses"] != inter["losses"]:
    bad.append(f"interleaved: losses {spill['losses']} vs {inter['losses']}")
for m, p, r, q in zip(spill["per_rank"], pred["per_rank"], inter["per_rank"], inter_pred["per_rank"]):
    # Lower where the simulator says spilling lowers the peak (double buffered, a rank whose peak
    # falls while both its stages are in can save nothing, and its runs differ by 128 KiB).
    if p["peak_memory_bytes"] < q["peak_memory_bytes"] and not m["peak_memory_bytes"] < r["peak_memory_bytes"]:
        bad.append(f"rank {m['rank']}: spilled device peak {m['peak_memory_bytes']} not below {r['peak_memory_bytes']}")
    for key in ("peak_memory_bytes", "peak_host_memory_bytes"):
        if abs(m[key] / p[key] - 1) > 0.1:
            bad.append(f"rank {m['rank']}: {key} {m[key]} vs predicted {p[key]}")
whole, shards = load("whole"), load("shards")
if shards["losses"] != whole["losses"]:
    bad.append(f"spilled: losses {shards['losses']} vs the whole model's {whole['losses']}")
if not shards["per_rank"][0]["peak_memory_bytes"] <= 24 << 20:
    bad.append(f"spilled: device peak {shards['per_rank'][0]['peak_memory_bytes']} over 24 MiB")
for b in bad:
    print("FAIL: spilled weights:", b)
sys.exit(1 if bad else 0)
PY
exit $fail
