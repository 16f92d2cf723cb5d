"""How close the simulator's predictions come to the executor's measurements (issue 11's targets):
profile -> simulate -> execute -> compare, RUNS times, on the main scenario and on a second shape
of it (hidden 1024, 10 steps), every schedule. Then, per shape and over both: the median and
largest |step-time error|, the largest |bubble error| and |peak-memory error| (per rank), the
measured step's step-to-step spread and its run-to-run spread (the machine's own noise), and the
errors against the median measured step. Each step-time error is split (compare --trace: a replay
of the run from its own op times) into the machine's cost drift and the model's error. Then the
stash's share (each run predicted again without its profile's stash), and data parallelism against
the pipeline: P = 1 x D = 2 replicas of microbatch b and a P = 2 x D = 1 pipeline of microbatch 2b
(1F1B), whose losses must agree (DESIGN.md §9). A benchmark: exits 0 whatever the errors."""
import re
import statistics
from collections import namedtuple
from pathlib import Path

from . import common

SHAPES = {"main": [], "hidden1024": ["model.mlp.hidden=1024", "pipeline.steps=10"]}
Row = namedtuple("Row", "shape run schedule step_err bubble_err mem_err spread measured vs_median drift model model_bubble")


def profile_and_compare(d, np, scenario, sets):
    """profile -> simulate -> execute -> compare into folder `d` (logs beside)."""
    d.mkdir(parents=True, exist_ok=True)
    sc, s = common.cli(), common.sets(sets)
    common.mpirun(np, [sc, "profile", scenario, *s, "--out", d / "profile.yaml"], d / "profile.log")
    prof = ["--set", f"model.profile={d / 'profile.yaml'}"]
    common.run([sc, "simulate", scenario, *s, *prof, "--json", d / "predicted.json"], d / "simulate.log")
    common.mpirun(np, [sc, "execute", scenario, *s, *prof, "--json", d / "measured.json", "--trace", d / "measured.trace.json"],
                  d / "execute.log")
    text = common.run([sc, "compare", d / "predicted.json", d / "measured.json", "--trace", d / "measured.trace.json",
                       "--json", d / "compare.json"], d / "compare.log")
    return (text.strip().splitlines() or [""])[-1]


def rows_of(shape, run, compare):
    """A compare --json file's schedules as Rows."""
    out = []
    for s in compare["schedules"]:
        spread = s.get("measured_step_spread", {})
        median = spread.get("median_ms")
        pred = s["step_time_ms"]["predicted"]
        out.append(Row(shape, run, s["schedule"], s["step_time_ms"]["error_pct"], s["bubble_fraction"]["error_pp"],
                       max(abs(r["peak_memory_bytes"]["error_pct"]) for r in s["per_rank"]), spread.get("spread_pct"),
                       s["step_time_ms"]["measured"], 100 * (pred - median) / median if median else None,
                       s.get("cost_drift_pct"), s.get("model_error_pct"), s.get("model_bubble_error_pp")))
    return out


def run_to_run(rows):
    """The machine's own noise: per schedule (max - min) / median of its measured step over the
    runs, in %, the median over schedules (0 with one run)."""
    by_schedule = {}
    for r in rows:
        by_schedule.setdefault(r.schedule, []).append(r.measured)
    gaps = [100 * (max(v) - min(v)) / statistics.median(v) for v in by_schedule.values() if len(v) > 1]
    return statistics.median(gaps) if gaps else 0.0


def summary(label, rows, noise):
    """One line over `rows`: median and largest |step error|, largest |bubble| and |memory| error,
    median spread, the run-to-run noise, and the errors against the median measured step."""
    spreads = [r.spread for r in rows if r.spread is not None]
    vm = [r.vs_median for r in rows if r.vs_median is not None] or [0.0]
    return (f"{label:<16} {common.median_abs([r.step_err for r in rows]):>12.1f}% {common.max_abs([r.step_err for r in rows]):>9.1f}%"
            f" {common.max_abs([r.bubble_err for r in rows]):>9.1f} pp {max(r.mem_err for r in rows):>8.1f}%"
            f" {(statistics.median(spreads) if spreads else 0):>12.1f}% {noise:>9.1f}% {common.median_abs(vm):>22.1f}%"
            f" {common.max_abs(vm):>5.1f}%")


def fmt(value, spec, none="-"):
    return format(value, spec) + "%" if value is not None else none


def report(rows):
    """The per-run table, the summaries per shape and over all, and the error split."""
    out = ["", f"{'shape':<11} {'run':>3} {'schedule':<12} {'step err':>9} {'= drift':>8} {'+ model':>8} {'vs median':>9}"
           f" {'bubble err':>11} {'mem err':>8} {'spread':>7}"]
    for r in rows:
        out.append(f"{r.shape:<11} {r.run:>3} {r.schedule:<12} {r.step_err:>+8.1f}% {fmt(r.drift, '+.1f'):>8} "
                   f"{fmt(r.model, '+.1f'):>8} {fmt(r.vs_median, '+.1f'):>9} {r.bubble_err:>+8.1f} pp {r.mem_err:>7.1f}%"
                   f" {fmt(r.spread, '.1f'):>7}")
    out += ["", f"{'over':<16} {'median |step|':>13} {'max |step|':>10} {'max |bubble|':>12} {'max |mem|':>9}"
            f" {'median spread':>13} {'run-to-run':>10} {'vs median: median |err|':>23} {'max':>6}"]
    shapes = list(dict.fromkeys(r.shape for r in rows))
    noises = {shape: run_to_run([r for r in rows if r.shape == shape]) for shape in shapes}
    for shape in shapes:
        out.append(summary(shape, [r for r in rows if r.shape == shape], noises[shape]))
    out.append(summary("all", rows, statistics.median(noises.values())))
    out += [f"{'target':<16} {'<= 2.0%':>13} {'<= 5.0%':>10} {'<= 1.5 pp':>12} {'<= 2.0%':>9}", ""]
    split = [r for r in rows if r.model is not None]
    if split:
        model = [r.model for r in split]
        out.append(f"error split over {len(split)} schedule runs: model error median |{common.median_abs(model):.2f}%|, "
                   f"largest |{common.max_abs(model):.2f}%| (targets 1% and 2%), the replay's bubble error largest "
                   f"|{common.max_abs([r.model_bubble for r in split]):.2f}| pp (target 1 pp); cost drift median "
                   f"|{common.median_abs([r.drift for r in split]):.1f}%|, largest |{common.max_abs([r.drift for r in split]):.1f}%|")
        out += [f"  over a target: {r.shape} run {r.run} {r.schedule}: model error {r.model:+.2f}%, bubble {r.model_bubble:+.2f} pp"
                for r in split if abs(r.model) > 2 or abs(r.model_bubble) > 1]
    return out


def without_stash(profile_text):
    """A profile's YAML without its ranks' `stash: {...}` lines (sim/stash.h)."""
    return re.sub(r"\n +stash: \{.*\}", "", profile_text)


def stash_share(out, runs, scenario, shapes):
    """Each run predicted again without its profile's stash: per schedule the mean step-time error
    against 1F1B's in the same run, without / with."""
    paired = {"with": {}, "without": {}}
    for shape, sets in shapes.items():
        for k in range(1, runs + 1):
            d = out / shape / f"run{k}"
            measured = {s["schedule"]: s["step_time_ms"] for s in common.read_json(d / "measured.json")["schedules"]}
            common.write_text(d / "profile-without-stash.yaml", without_stash((d / "profile.yaml").read_text()))
            for tag, prof in (("with", "profile.yaml"), ("without", "profile-without-stash.yaml")):
                pred = common.simulate(scenario, [*sets, f"model.profile={d / prof}"])
                err = {s["schedule"]: 100 * (s["step_time_ms"] / measured[s["schedule"]] - 1) for s in pred}
                if "1f1b" not in err:
                    raise common.ToolError("the stash's share is against 1F1B: keep 1f1b among the schedules")
                for name, e in err.items():
                    paired[tag].setdefault(name, []).append(e - err["1f1b"])
    return ["the stash's share: mean step-time error against 1F1B's in the same run, without / with the profile's stash",
            "  " + "  ".join(f"{n} {statistics.mean(paired['without'][n]):+.1f} / {statistics.mean(paired['with'][n]):+.1f}"
                             for n in paired["with"] if n != "1f1b")]


def layouts(out):
    """Data parallelism against the pipeline: predicted and measured steps, losses, and the
    largest relative loss difference (the same training)."""
    lines = ["", f"{'layout':<26} {'predicted':>10} {'measured':>10} {'step err':>9}  losses"]
    losses = {}
    for layout, label in (("dp2", "P=1 x D=2, microbatch b"), ("pp2", "P=2 x D=1, microbatch 2b")):
        c = common.read_json(out / "layouts" / layout / "compare.json")["schedules"][0]["step_time_ms"]
        losses[layout] = common.read_json(out / "layouts" / layout / "measured.json")["schedules"][0]["losses"]
        lines.append(f"{label:<26} {c['predicted']:>8.2f} ms {c['measured']:>7.2f} ms {c['error_pct']:>+8.1f}%  "
                     + " ".join(f"{x:.6f}" for x in losses[layout]))
    lines.append(f"the same training: largest relative loss difference {loss_difference(losses['dp2'], losses['pp2']):.2g}"
                 " (DESIGN.md §9: within 1e-5)")
    return lines


def loss_difference(a, b):
    """The largest |a - b| / |b| over two loss curves."""
    return max(abs(x - y) / abs(y) for x, y in zip(a, b))


def main(argv):
    parser = common.ArgumentParser(prog="accuracy.sh", description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="?", default="3", help="runs per shape (default 3)")
    parser.add_argument("--scenario", default=str(common.SCENARIOS / "mlp-cpu.yaml"))
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="an override for every run")
    parser.add_argument("--out", default=str(common.build_dir() / "out" / "accuracy"), help="output folder")
    args = parser.parse_args(argv)
    runs = common.positive_int(args.runs, "RUNS")
    scenario = args.scenario
    base = common.simulate(scenario, args.set)[0]  # a bad scenario or override stops here, with its line
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    print(f"scenario {scenario}, {runs} run(s) per shape, 1-minute load {common.load1()} at the start", flush=True)
    shapes = {name: [*sets, *args.set] for name, sets in SHAPES.items()}
    rows = []
    for shape, sets in shapes.items():
        for k in range(1, runs + 1):
            d = out / shape / f"run{k}"
            print(f"{shape} run {k}: {profile_and_compare(d, base['ranks'], scenario, sets)}", flush=True)
            rows += rows_of(shape, k, common.read_json(d / "compare.json"))
    b = base["microbatch_size"]
    for layout, sets in (("dp2", ["pipeline.ranks=1", "pipeline.data_parallel=2", f"pipeline.microbatch_size={b}"]),
                         ("pp2", ["pipeline.ranks=2", "pipeline.data_parallel=1", f"pipeline.microbatch_size={2 * b}"])):
        # The profile is of the layout itself on its 2 processes, at its microbatch size.
        print(f"{layout}: {profile_and_compare(out / 'layouts' / layout, 2, scenario, [*args.set, 'pipeline.schedule=1f1b', *sets])}",
              flush=True)
    lines = report(rows) + stash_share(out, runs, scenario, shapes)
    lines += ["spread: the measured step time's (max - min) / median over steps 1.. of one run (median over runs);",
              "run-to-run: one schedule's measured step time, (max - min) / median over the runs (median over schedules)",
              "vs median: the predicted step time against the median measured step of steps 1.. (bursts and the",
              "           first step's cold start left out), where step err is against makespan / steps"]
    print("\n".join(lines + layouts(out)))
    return 0


if __name__ == "__main__":
    raise SystemExit(common.entry("accuracy", main))
