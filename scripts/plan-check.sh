#!/usr/bin/env bash
# Checks `stagecraft plan` against real runs on this machine: profiles the main CPU scenario's
# model (scenarios/mlp-cpu.yaml: 8 x Linear(512, 512) + GELU, 2 ranks, global batch 8 x 64 = 512)
# as scripts/run.sh does, plans it for 2 devices (2 CPU ranks: P = 2, D = 1 or P = 1, D = 2; ZeRO-1
# and tensor parallelism are simulated only, so the plan keeps to ZeRO 0 and T = 1) with that
# profile as its costs, then executes its top three configurations for real under MPI (the first
# from its --write-best scenario as written, the others through --set) and prints whether the
# measured order agrees with the predicted one, and by how much each run's step and each rank's
# measured peak memory differ from the prediction (the peak must stay within +2%).
# Everything lands in build/out/plan-check/. Exits 1 when a measured peak is over its predicted
# peak by more than 2%. The order on a shared 2-core machine is only as firm as the runs' own
# step-to-step spread (printed beside).
# Usage: scripts/plan-check.sh [PLAN FLAGS...]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
sc="${STAGECRAFT:-$root/build/cli/stagecraft}"   # STAGECRAFT=BINARY runs another build
[[ -x "$sc" ]] || "$root/scripts/build.sh" >/dev/null
scenario="$root/scenarios/mlp-cpu.yaml"
out="$root/build/out/plan-check"
mkdir -p "$out"
echo "== profile the model on this machine (2 ranks at once, as loaded as the runs)"
"$root/scripts/mpirun.sh" 2 "$sc" profile "$scenario" --out "$out/profile.yaml" >"$out/profile.log"
echo "== plan 2 devices, global batch 512, from the profile"
"$sc" plan "$scenario" --set model.profile="$out/profile.yaml" --gpus 2 --global-batch 512 --zero 0 --refine 0 \
  --top 3 --json "$out/plan.json" --write-best "$out/best.yaml" "$@" | sed -n '/^top 3/,/^why/p' | sed '$d'
echo "== execute the top three"
python3 - "$root" "$sc" "$scenario" "$out" <<'PY'
import json, statistics, subprocess, sys
root, sc, scenario, out = sys.argv[1:]
with open(f"{out}/plan.json") as fh:
    plan = json.load(fh)
top = [c for c in plan["configurations"] if c["fits"]][:3]
KEYS = ["schedule", "ranks", "chunks", "microbatches", "microbatch_size", "data_parallel", "tensor_parallel",
        "sequence_parallel", "zero", "recompute", "partition"]
rows, worst_memory = [], 0.0
for k, c in enumerate(top):
    layout = c["layout"]
    np_ = layout["ranks"] * layout["data_parallel"]
    if k == 0:  # the winner as --write-best wrote it, taken as it is
        args = [f"{out}/best.yaml"]
    else:
        sets = [f"model.profile={out}/profile.yaml"] + [
            f"pipeline.{key}={str(layout[key]).lower()}" for key in KEYS]
        args = [scenario] + sum((["--set", s] for s in sets), [])
    run = subprocess.run([f"{root}/scripts/mpirun.sh", str(np_), sc, "execute", *args, "--json", f"{out}/measured-{k + 1}.json"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if run.returncode != 0:
        sys.exit(f"execute of #{k + 1} failed: {run.stderr.strip()}")
    with open(f"{out}/measured-{k + 1}.json") as fh:
        measured = json.load(fh)["schedules"][0]
    steps = measured.get("step_ms", [])[1:]  # the first step pays the start
    spread = statistics.pstdev(steps) / statistics.mean(steps) if len(steps) > 1 else 0
    peaks = []
    for pred, meas in zip(c["metrics"]["per_rank"], measured["per_rank"]):
        ratio = meas["peak_memory_bytes"] / pred["peak_memory_bytes"] - 1
        peaks.append(ratio)
        worst_memory = max(worst_memory, ratio)
    rows.append((k + 1, layout, c["metrics"]["step_time_ms"], measured["step_time_ms"], spread, peaks))
name = lambda l: (f"{l['schedule']} P{l['ranks']} D{l['data_parallel']} b{l['microbatch_size']} m{l['microbatches']}"
                  + (f" v{l['chunks']}" if l['chunks'] > 1 else "") + f" {l['recompute']} {l['partition']}")
print(f"{'#':>2}  {'configuration':<40} {'predicted ms':>12} {'measured ms':>12} {'error':>7} {'spread':>7}  "
      f"measured peak vs predicted, per rank")
for k, layout, pred, meas, spread, peaks in rows:
    print(f"{k:>2}  {name(layout):<40} {pred:>12.3f} {meas:>12.3f} {100 * (pred / meas - 1):>+6.1f}% {100 * spread:>6.1f}%  "
          + ", ".join(f"{100 * p:+.2f}%" for p in peaks))
measured_order = [k for k, *_ in sorted(rows, key=lambda r: r[3])]
predicted_order = [k for k, *_ in rows]
if measured_order == predicted_order:
    print(f"measured order {measured_order}: agrees with the predicted order")
else:
    # How far the runs are from the predicted order: each pair the measurement swaps, by its gap.
    swaps = []
    for i in range(len(rows)):
        for j in range(i + 1, len(rows)):
            if rows[i][3] > rows[j][3]:
                swaps.append(f"#{rows[i][0]} measured {100 * (rows[i][3] / rows[j][3] - 1):.1f}% slower than #{rows[j][0]} "
                             f"(predicted {100 * (rows[j][2] / rows[i][2] - 1):.1f}% faster)")
    print(f"measured order {measured_order}, predicted {predicted_order}: " + "; ".join(swaps))
print(f"largest measured peak over the prediction: {100 * worst_memory:+.2f}% (limit +2%)")
sys.exit(0 if worst_memory <= 0.02 else 1)
PY
