"""Checks `stagecraft plan` against real runs on this machine: profiles the main CPU scenario's
model (scenarios/mlp-cpu.yaml, 2 ranks), plans it for 2 devices (P = 2, D = 1 or P = 1, D = 2;
ZeRO 0 and T = 1, what the CPU executor runs) with that profile as its costs, executes its top
three configurations under MPI (the first from its --write-best scenario as written, the others
through --set), and prints whether the measured order agrees with the predicted one and how far
each run's step and each rank's measured peak memory are from the prediction. Exits 1 when a
measured peak is over its predicted peak by more than 2%."""
import statistics
from pathlib import Path

from . import common

KEYS = ["schedule", "ranks", "chunks", "microbatches", "microbatch_size", "data_parallel", "tensor_parallel",
        "sequence_parallel", "zero", "recompute", "partition"]
MEMORY_LIMIT = 0.02


def name(l):
    """A layout in one short line."""
    return (f"{l['schedule']} P{l['ranks']} D{l['data_parallel']} b{l['microbatch_size']} m{l['microbatches']}"
            + (f" v{l['chunks']}" if l["chunks"] > 1 else "") + f" {l['recompute']} {l['partition']}")


def spread(step_ms):
    """The steps' standard deviation over their mean, the first step (which pays the start) left out."""
    steps = step_ms[1:]
    return statistics.pstdev(steps) / statistics.mean(steps) if len(steps) > 1 else 0.0


def peak_ratios(predicted, measured):
    """Per rank, the measured peak over the predicted, minus 1."""
    return [m["peak_memory_bytes"] / p["peak_memory_bytes"] - 1 for p, m in zip(predicted, measured)]


def order_line(rows):
    """rows: (k, predicted ms, measured ms) in the predicted order: the measured order, and each
    pair the measurement swaps with its gap."""
    measured = [k for k, *_ in sorted(rows, key=lambda r: r[2])]
    predicted = [k for k, *_ in rows]
    if measured == predicted:
        return f"measured order {measured}: agrees with the predicted order"
    swaps = [f"#{a[0]} measured {100 * (a[2] / b[2] - 1):.1f}% slower than #{b[0]} (predicted {100 * (b[1] / a[1] - 1):.1f}% faster)"
             for i, a in enumerate(rows) for b in rows[i + 1:] if a[2] > b[2]]
    return f"measured order {measured}, predicted {predicted}: " + "; ".join(swaps)


def main(argv):
    parser = common.ArgumentParser(prog="plan-check.sh", description=__doc__.splitlines()[0])
    parser.add_argument("--global-batch", default="512", help="the plan's global batch (default 512, the scenario's)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="an override of mlp-cpu.yaml")
    parser.add_argument("--out", default=str(common.build_dir() / "out" / "plan-check"), help="output folder")
    args, plan_flags = parser.parse_known_args(argv)
    batch = common.positive_int(args.global_batch, "--global-batch")
    scenario = common.SCENARIOS / "mlp-cpu.yaml"
    common.simulate(scenario, args.set)  # a bad override stops here, with its line
    sc, out = common.cli(), Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    base = common.sets(args.set)
    print("== profile the model on this machine (2 ranks at once, as loaded as the runs)", flush=True)
    common.mpirun(2, [sc, "profile", scenario, *base, "--out", out / "profile.yaml"], out / "profile.log")
    print(f"== plan 2 devices, global batch {batch}, from the profile", flush=True)
    prof = f"model.profile={out / 'profile.yaml'}"
    common.run([sc, "plan", scenario, *base, "--set", prof, "--gpus", "2", "--global-batch", batch, "--zero", "0",
                "--refine", "0", "--top", "3", "--json", out / "plan.json", "--write-best", out / "best.yaml", *plan_flags],
               out / "plan.log")
    top = [c for c in common.read_json(out / "plan.json")["configurations"] if c["fits"]][:3]
    print("== execute the top three", flush=True)
    rows, worst = [], 0.0
    for k, c in enumerate(top, 1):
        layout = c["layout"]
        if k == 1:  # the winner as --write-best wrote it, taken as it is
            target = [out / "best.yaml"]
        else:
            target = [scenario, *base, *common.sets([prof] + [f"pipeline.{key}={str(layout[key]).lower()}" for key in KEYS])]
        common.mpirun(layout["ranks"] * layout["data_parallel"], [sc, "execute", *target, "--json", out / f"measured-{k}.json"],
                      out / f"measured-{k}.log")
        measured = common.read_json(out / f"measured-{k}.json")["schedules"][0]
        peaks = peak_ratios(c["metrics"]["per_rank"], measured["per_rank"])
        worst = max([worst, *peaks])
        rows.append((k, layout, c["metrics"]["step_time_ms"], measured["step_time_ms"], spread(measured.get("step_ms", [])), peaks))
    print(f"{'#':>2}  {'configuration':<40} {'predicted ms':>12} {'measured ms':>12} {'error':>7} {'spread':>7}  "
          "measured peak vs predicted, per rank")
    for k, layout, pred, meas, sp, peaks in rows:
        print(f"{k:>2}  {name(layout):<40} {pred:>12.3f} {meas:>12.3f} {100 * (pred / meas - 1):>+6.1f}% {100 * sp:>6.1f}%  "
              + ", ".join(f"{100 * p:+.2f}%" for p in peaks))
    print(order_line([(k, pred, meas) for k, _, pred, meas, *_ in rows]))
    print(f"largest measured peak over the prediction: {100 * worst:+.2f}% (limit +2%)")
    return 0 if worst <= MEMORY_LIMIT else 1


if __name__ == "__main__":
    raise SystemExit(common.entry("plan-check", main))
