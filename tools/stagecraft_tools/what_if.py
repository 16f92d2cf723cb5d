"""What-if against reality (issue 31): for every schedule at the scenario's microbatch count and at
half and twice it, execute the base schedule (1F1B), replay it into that what-if (`stagecraft
replay --set ...`: each stage's pass times are the base run's medians, scaled by how the profile's
cost model says each pass changes between the two schedules), execute the what-if right after,
and compare. Every pair reports its op-time drift (the stages' median F from the base run to the
what-if's run): where it stays under 2% the what-if's own error shows. A benchmark: exits 0
whatever the errors."""
from collections import namedtuple
from pathlib import Path

from . import common

BASE = "1f1b"
Pair = namedtuple("Pair", "run schedule microbatches predicted measured error bubble_err drift")


def forward_ms(schedule):
    """The stages' median F summed: the machine's speed on the one pass every schedule runs alike."""
    return sum(s["forward_ms"] for s in schedule["stages"])


def drift_pct(base, measured):
    return 100 * (forward_ms(measured) - forward_ms(base)) / forward_ms(base)


def run_pair(p, ranks, scenario, profile, name, mb, sets):
    """The base executed, replayed into (name, mb), the what-if executed, compared; files at `p`.*"""
    sc, s = common.cli(), common.sets(sets)
    common.mpirun(ranks, [sc, "execute", scenario, *s, "--set", f"pipeline.schedule={BASE}", "--json", f"{p}.base.json",
                          "--trace", f"{p}.base.trace.json"], f"{p}.base.log")
    what = ["--set", f"pipeline.schedule={name}", "--set", f"pipeline.microbatches={mb}"]
    # The prediction first, from the base run alone; then the run it predicts.
    common.run([sc, "replay", f"{p}.base.json", "--trace", f"{p}.base.trace.json", *s, *what, "--set",
                f"model.profile={profile}", "--json", f"{p}.whatif.json"], f"{p}.whatif.log")
    common.mpirun(ranks, [sc, "execute", scenario, *s, *what, "--json", f"{p}.measured.json"], f"{p}.measured.log")
    common.run([sc, "compare", f"{p}.whatif.json", f"{p}.measured.json", "--json", f"{p}.compare.json"], f"{p}.compare.log")


def pair_of(k, name, mb, base, measured, compare):
    """A Pair from the three JSON files of one what-if (their first schedule each)."""
    c = compare["schedules"][0]
    return Pair(k, name, mb, c["step_time_ms"]["predicted"], c["step_time_ms"]["measured"], c["step_time_ms"]["error_pct"],
                c["bubble_fraction"]["error_pp"], drift_pct(base["schedules"][0], measured["schedules"][0]))


def summary(label, pairs):
    if not pairs:
        return f"{label}: none"
    return (f"{label}: {len(pairs)} runs, what-if |step-time error| median {common.median_abs([p.error for p in pairs]):.1f}%, "
            f"largest {common.max_abs([p.error for p in pairs]):.1f}%; largest |bubble error| "
            f"{common.max_abs([p.bubble_err for p in pairs]):.1f} pp")


def report(pairs):
    out = ["", f"{'run':>3} {'schedule':<12} {'mb':>3} {'what-if ms':>10} {'measured ms':>11} {'error':>7} {'bubble err':>10}"
           f" {'F drift':>8}"]
    for p in pairs:
        held = "" if abs(p.drift) < 2 else "  (drifted)"
        out.append(f"{p.run:>3} {p.schedule:<12} {p.microbatches:>3} {p.predicted:>10.3f} {p.measured:>11.3f} {p.error:>+6.1f}% "
                   f"{p.bubble_err:>+7.1f} pp {p.drift:>+7.1f}%{held}")
    out += ["", summary("where the machine's speed held (|F drift| < 2%)", [p for p in pairs if abs(p.drift) < 2]),
            summary("all", pairs), "target (issue 31): median <= 3% where the speed held",
            "F drift: the executed run's stages' median F against the base run's (the machine's speed moving)"]
    return out


def main(argv):
    parser = common.ArgumentParser(prog="what-if.sh", description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="?", default="2", help="rounds (default 2)")
    parser.add_argument("scenario", nargs="?", default=str(common.SCENARIOS / "mlp-cpu.yaml"),
                        help="a scenario the CPU executor runs (default scenarios/mlp-cpu.yaml)")
    parser.add_argument("--schedules", help="the what-ifs' schedules, comma-separated (default every one)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="an override for every run")
    parser.add_argument("--out", default=str(common.build_dir() / "out" / "what-if"), help="output folder")
    args = parser.parse_args(argv)
    runs = common.positive_int(args.runs, "RUNS")
    if not Path(args.scenario).is_file():
        raise common.usage_error(f"{args.scenario}: no such scenario")
    every = common.simulate(args.scenario, [*args.set, "pipeline.schedule=all"])
    names = [s["schedule"] for s in every]
    if args.schedules:
        wanted = args.schedules.split(",")
        unknown = [n for n in wanted if n not in names]
        if unknown:
            raise common.usage_error(f"--schedules: {', '.join(unknown)}: not among this scenario's ({', '.join(names)})")
        names = wanted
    ranks, m = every[0]["ranks"], every[0]["microbatches"]
    counts = [m, m // 2, 2 * m]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    print(f"scenario {args.scenario}: base {BASE} at {m} microbatches, what-ifs: {' '.join(names)} at "
          f"{' '.join(map(str, counts))} microbatches; {runs} run(s), 1-minute load {common.load1()} at the start", flush=True)
    # The profile measures what one run of one schedule cannot show (I and W apart, a STEP per
    # microbatch); the replay takes from it how a pass changes between schedules.
    profile = out / "profile.yaml"
    common.mpirun(ranks, [common.cli(), "profile", args.scenario, *common.sets(args.set), "--out", profile], out / "profile.log")
    pairs = []
    for k in range(1, runs + 1):
        (out / f"run{k}").mkdir(exist_ok=True)
        for mb in counts:
            for name in names:
                p = out / f"run{k}" / f"{name}.{mb}"
                run_pair(p, ranks, args.scenario, profile, name, mb, args.set)
                pairs.append(pair_of(k, name, mb, *(common.read_json(f"{p}.{x}.json") for x in ("base", "measured", "compare"))))
        print(f"run {k} done", flush=True)
    print("\n".join(report(pairs)))
    return 0


if __name__ == "__main__":
    raise SystemExit(common.entry("what-if", main))
