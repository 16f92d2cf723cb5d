"""Issue 32's targets for `stagecraft search`, measured (a benchmark: exits 0 whatever the numbers,
non-zero only when a command fails):
  1. Table 5: on every setting of the Zero Bubble paper's cost model, the search within 2p forwards'
     activations against ZB-2p's bubble rate, within p against ZB-1p's (the paper's rate; the
     searches judge a run of 1000 steps);
  2. uneven stages: the paper's 1.5B costs with the last stage 1.5x the others, and
     gpt-1.3b-8xh100.yaml with partition: even, against the best hand-written flush schedule that
     fits, per step of a 1000-step run and one step alone, beside the bound no order can beat;
  3. the CPU executor's main scenario (mlp-cpu.yaml): profiled, searched on that profile, then every
     hand-written flush schedule and the searched one executed RUNS times (median throughput), then
     the best hand schedule, the searched one and a control (the best hand schedule's own order as
     a schedule file) on 2 x RUNS fresh runs (the control's ratio is the method's resolution);
  4. a search for 8 ranks x 32 microbatches (gpt-1.3b-8xh100.yaml) on one core: wall time."""
import os
import statistics
import time
from pathlib import Path

from . import common, zb_replay

HAND = ["gpipe", "1f1b", "interleaved", "zb-h1", "zb-h2", "zb-v", "dualpipe-v"]  # flush policy, hand-written
PAPER = common.SCENARIOS / "zero-bubble-paper.yaml"
GPT = common.SCENARIOS / "gpt-1.3b-8xh100.yaml"
MLP = common.SCENARIOS / "mlp-cpu.yaml"


def setting_sets(s):
    """A Table 5 setting's costs and shape as overrides of the paper's scenario."""
    return [f"topology.devices_per_node={s.p}", f"pipeline.ranks={s.p}", f"pipeline.microbatches={s.m}",
            f"model.costs.forward={s.f}ms", f"model.costs.backward_input={s.b}ms",
            f"model.costs.backward_weight={s.w}ms", f"model.costs.p2p_latency={s.comm}ms"]


def part1(out, budget, rows):
    print(f"\n== 1. Table 5 settings: search (from the best generator, {budget} s) vs the automatic scheduler")
    print(f"{'model':>6} {'p':>3} {'m':>4}  {'ZB-1p':>7} {'search 1p':>10} {'start':>8}  {'ZB-2p':>7} {'search 2p':>10} {'start':>8}")
    misses = 0
    for s in rows:
        ideal = s.m * (s.f + s.b + s.w)
        zb = zb_replay.rates(s, ["zb-1p", "zb-2p"])
        cells = []
        for k, ref in (("1p", zb["zb-1p"]), ("2p", zb["zb-2p"])):
            tag = f"{out}/{s.model}-{s.m}.{k}"
            common.run([common.cli(), "search", PAPER, *common.sets(setting_sets(s)), "--set", "pipeline.steps=1000",
                        "--memory-limit", k, "--budget", budget, "--out", f"{tag}.csv", "--json", f"{tag}.json"], f"{tag}.log")
            start, searched = common.read_json(f"{tag}.json")["schedules"][:2]
            got = common.paper_bubble_rate(searched, ideal)
            misses += got > ref + 1e-9
            cells.append(f"{ref:>7.4f} {got:>10.4f} {start['schedule']:>8}")
        print(f"{s.model:>6} {s.p:>3} {s.m:>4}  " + "  ".join(cells), flush=True)
    print(f"target (search at or below ZB-1p at 1p and ZB-2p at 2p): {'met on every setting' if misses == 0 else f'missed {misses} time(s)'}")
    return misses


def best_hand(schedules, steps):
    """(step ms, name) of the fastest schedule that fits, a step of a `steps`-step run."""
    return min((common.long_run_step_ms(s, steps), s["schedule"]) for s in schedules if not s.get("oom", False))


def verdict(gain_pct, most_pct, target_pct=5):
    return "target met" if gain_pct >= target_pct else \
        "target not met" + (" (and out of reach of any order)" if most_pct < target_pct else "")


def part2(budget):
    print("\n== 2. uneven stages: search vs the best hand-written flush schedule that fits (target: 5% shorter)")
    s = zb_replay.settings()[0]
    heavy_last = lambda x: "[" + ", ".join([f"{x}ms"] * 7 + [f"{1.5 * x:.4f}ms"]) + "]"
    cases = [("paper 1.5B, last stage 1.5x", PAPER, [f"model.costs.forward={heavy_last(s.f)}",
                                                     f"model.costs.backward_input={heavy_last(s.b)}",
                                                     f"model.costs.backward_weight={heavy_last(s.w)}"]),
             ("gpt-1.3b-8xh100, partition even", GPT, ["pipeline.partition=even"])]
    sc = common.module()
    for name, scenario, sets in cases:
        hand = common.simulate(scenario, [*sets, "pipeline.steps=1", f"pipeline.schedule=[{','.join(HAND)}]"])
        for reading, steps in (("per step of 1000", 1000), ("one step alone", 1)):
            best_ms, best_name = best_hand(hand, steps)
            result = sc.search(sc.Scenario.load(str(scenario), [*sets, f"pipeline.steps={steps}"]), budget=float(budget))
            gain = 100 * (1 - result.best_step_ms / best_ms)
            most = 100 * (1 - result.bound_ms / best_ms)
            print(f"{name}, {reading}: best hand {best_name} {best_ms:.3f} ms, searched {result.best_step_ms:.3f} ms "
                  f"({gain:+.2f}% shorter); no order of the generators' placements can beat {result.bound_ms:.3f} ms, so at "
                  f"most {most:.2f}% shorter is possible: " + verdict(gain, most), flush=True)


def execute_throughputs(out, tag, schedules, sets):
    """One execute of `schedules` on mlp-cpu's 2 ranks: {schedule: samples/s}."""
    common.mpirun(2, [common.cli(), "execute", MLP, *common.sets(sets), "--set", f"pipeline.schedule=[{','.join(schedules)}]",
                      "--json", f"{out}/{tag}.json"], f"{out}/{tag}.log")
    return {s["schedule"]: s["throughput_samples_per_s"] for s in common.read_json(f"{out}/{tag}.json")["schedules"]}


def ratios(a, b):
    """Sorted per-run ratios a / b with their median, quartiles and range."""
    r = sorted(x / y for x, y in zip(a, b))
    return statistics.median(r), r[len(r) // 4], r[(3 * len(r)) // 4], r[0], r[-1]


def part3(out, budget, runs, sets):
    print(f"\n== 3. mlp-cpu.yaml on this machine: profiled, searched on the profile, executed {runs} time(s)")
    common.mpirun(2, [common.cli(), "profile", MLP, *common.sets(sets), "--out", f"{out}/profile.yaml"], f"{out}/profile.log")
    sets = [*sets, f"model.profile={out}/profile.yaml"]
    sc = common.module()
    result = sc.search(sc.Scenario.load(str(MLP), sets), budget=float(budget))
    searched = f"{out}/mlp-cpu.searched.csv"
    common.write_text(searched, result.to_csv())
    print(f"  searched: {result.best_step_ms:.3f} ms per step; start {result.start_name}")
    names = HAND + [searched]
    tput = {}
    for i in range(runs):
        order = names if i % 2 == 0 else list(reversed(names))  # the order alternates: drift hits both ends alike
        for k, v in execute_throughputs(out, f"exec.{i}", order, sets).items():
            tput.setdefault("searched" if k.endswith(".csv") else k, []).append(v)
    med = {k: statistics.median(v) for k, v in tput.items()}
    best = max((k for k in med if k != "searched"), key=lambda k: med[k])
    for k in sorted(med, key=lambda k: -med[k]):
        print(f"  {k:>12}: median {med[k]:8.1f} samples/s (runs {min(tput[k]):.1f}..{max(tput[k]):.1f})")
    same = [s / h for s, h in zip(tput["searched"], tput[best])]
    print(f"  searched / best hand ({best}), same runs: median {med['searched'] / med[best]:.3f}, per run "
          f"{min(same):.3f}..{max(same):.3f} (biased towards the hand side: the best hand schedule is chosen on these runs)")
    # The best of seven noisy medians, chosen on the runs it is compared on, measures high by that
    # choice alone: the two meet again on fresh runs, beside a control (the best hand schedule's own
    # order as a schedule file), whose ratio is the method's resolution on this machine.
    layout = common.simulate(MLP, sets)[0]
    control = f"{out}/mlp-cpu.{best}.csv"
    chunks = "2" if best in ("interleaved", "zb-v", "dualpipe-v") else "1"
    common.write_text(control, common.run([common.cli(), "schedule", "--schedule", best, "--ranks", layout["ranks"],
                                           "--microbatches", layout["microbatches"], "--chunks", chunks, "--format", "csv"]))
    trio = {best: best, searched: "searched", control: "control"}
    fresh = {"searched": [], "control": [], best: []}
    perms = [[0, 1, 2], [2, 1, 0], [1, 2, 0], [0, 2, 1], [2, 0, 1], [1, 0, 2]]
    for i in range(2 * runs):
        got = execute_throughputs(out, f"fresh.{i}", [list(trio)[j] for j in perms[i % 6]], sets)
        for k, v in got.items():
            fresh[trio[k]].append(v)
    ms, s1, s3, slo, shi = ratios(fresh["searched"], fresh[best])
    mc, c1, c3, clo, chi = ratios(fresh["control"], fresh[best])
    print(f"  fresh runs ({2 * runs}), each of {best}, the searched order and the control ({best}'s own order "
          "as a schedule file) in turn:")
    print(f"    searched / {best}: median {ms:.3f}, middle half {s1:.3f}..{s3:.3f}, per run {slo:.3f}..{shi:.3f}")
    print(f"    control  / {best}: median {mc:.3f}, middle half {c1:.3f}..{c3:.3f}, per run {clo:.3f}..{chi:.3f}"
          " (equal orders: the method's resolution)")
    print("  " + target_line(Path(searched).read_text() == Path(control).read_text(), best, ms, c1))


def target_line(same_order, best, searched_median, control_q1):
    if same_order:
        return (f"the search kept {best}'s order (it found nothing shorter in the simulator): at the best hand "
                "schedule by construction; target (at or above) met by equality")
    if searched_median >= 1:
        return "target (at or above) met"
    if searched_median >= control_q1:
        return "target (at or above) not resolved: the searched order's median is within the control's middle half"
    return "target (at or above) not met"


def part4(out):
    print("\n== 4. search for 8 ranks x 32 microbatches (gpt-1.3b-8xh100.yaml) on one core, default budget")
    t = time.monotonic()
    common.run(["taskset", "-c", "0", common.cli(), "search", GPT, "--out", f"{out}/gpt.csv", "--json", f"{out}/gpt.json"],
               f"{out}/gpt-search.log")
    wall = time.monotonic() - t
    searched = common.read_json(f"{out}/gpt.json")["schedules"][1]
    print(f"  searched: {searched['step_time_ms']:.3f} ms per step")
    print(f"  wall time {wall:.2f} s: target (within 10 s) {'met' if wall <= 10 else 'not met'}")


def main(argv):
    parser = common.ArgumentParser(prog="search-bench.sh", description=__doc__.splitlines()[0])
    parser.add_argument("budget", nargs="?", default="2", help="seconds per search (default 2)")
    parser.add_argument("runs", nargs="?", default="5", help="executor runs of part 3 (default 5)")
    parser.add_argument("--parts", default=os.environ.get("SEARCH_BENCH_PARTS", "1234"), help="which parts (default 1234)")
    parser.add_argument("--models", help="part 1: Table 5's models only, comma-separated")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="part 3: an override of mlp-cpu.yaml")
    parser.add_argument("--out", default=str(common.build_dir() / "out" / "search-bench"), help="output folder")
    args = parser.parse_args(argv)
    try:
        if float(args.budget) <= 0:
            raise ValueError
    except ValueError:
        raise common.usage_error(f"BUDGET_S: expected a positive number of seconds, got '{args.budget}'")
    runs = common.positive_int(args.runs, "RUNS")
    if not args.parts or set(args.parts) - set("1234"):
        raise common.usage_error(f"--parts {args.parts}: expected digits of 1234")
    rows = zb_replay.settings()
    if args.models:
        rows = [s for s in rows if s.model in args.models.split(",")]
        if not rows:
            raise common.usage_error(f"--models {args.models}: no such model in Table 5")
    common.cli()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    print(f"search-bench: {args.budget} s per search, {runs} executor run(s), {os.cpu_count()} cores, "
          f"1-minute load {common.load1()}")
    if "1" in args.parts:
        part1(out, args.budget, rows)
    if "2" in args.parts:
        part2(args.budget)
    if "3" in args.parts:
        part3(out, args.budget, runs, args.set)
    if "4" in args.parts:
        part4(out)
    return 0


if __name__ == "__main__":
    raise SystemExit(common.entry("search-bench", main))
