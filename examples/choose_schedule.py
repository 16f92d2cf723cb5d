#!/usr/bin/env python3
"""Which schedule, with how many microbatches? Sweeps the microbatches of a scenario for every
schedule it names (``schedule: all``: every one its shape allows), prints throughput and peak
memory, plots both when matplotlib is installed, and writes the fastest schedule that fits in
device memory as a PyTorch ``torch.distributed.pipelining`` CSV (one step).

    PYTHONPATH=build/python python3 examples/choose_schedule.py scenarios/gpt-1.3b-8xh100.yaml \\
        --microbatches 8,16,32,64 --out best.csv --plot sweep.png
"""

import argparse
import sys
from pathlib import Path

import stagecraft


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("scenario", help="scenario YAML")
    parser.add_argument("--microbatches", help="comma-separated counts (default: 1, 2, 4 and 8 times the ranks)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="override a scenario key, as stagecraft simulate --set (repeatable)")
    parser.add_argument("--out", default="best.csv", help="where the best schedule's CSV goes (default best.csv)")
    parser.add_argument("--plot", help="where the plot goes (default: beside --out, .png)")
    return parser.parse_args()


def sweep(scenario, counts):
    """{schedule: [(microbatches, run)]} over the counts, every schedule at each."""
    results = {}
    for m in counts:
        for run in stagecraft.simulate(scenario.with_overrides({"pipeline.microbatches": m})):
            results.setdefault(run.schedule, []).append((m, run))
    return results


def plot(title, results, memory_bytes, path):
    try:
        import matplotlib
    except ImportError:
        print("matplotlib is not installed: no plot (Debian: apt install python3-matplotlib)")
        return
    matplotlib.use("Agg")  # files only, no display needed
    import matplotlib.pyplot as plt

    fig, (top, bottom) = plt.subplots(2, 1, figsize=(8, 8), sharex=True)
    for name, points in results.items():
        counts = [m for m, _ in points]
        top.plot(counts, [r.throughput_samples_per_s for _, r in points], marker="o", label=name)
        bottom.plot(counts, [r.peak_memory_bytes / 2**30 for _, r in points], marker="o", label=name)
    if memory_bytes:
        bottom.axhline(memory_bytes / 2**30, color="black", linestyle="--", label="device memory")
        bottom.legend(handles=bottom.get_lines()[-1:], fontsize="small")
    counts = sorted({m for points in results.values() for m, _ in points})
    top.set_title(title)
    top.set_ylabel("throughput (samples/s)")
    bottom.set_ylabel("peak memory, worst rank (GiB)")
    bottom.set_xlabel("microbatches per step")
    bottom.set_xscale("log", base=2)
    bottom.set_xticks(counts, [str(m) for m in counts])
    top.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(path)
    print(f"wrote {path}")


def main():
    args = parse_args()
    try:
        scenario = stagecraft.Scenario.load(args.scenario, args.set)
        counts = ([int(c) for c in args.microbatches.split(",")] if args.microbatches
                  else [k * scenario.ranks for k in (1, 2, 4, 8)])
        results = sweep(scenario, counts)
    except stagecraft.InputError as e:
        print(f"choose_schedule: error: {e}", file=sys.stderr)
        return 1

    print(f"{'schedule':<12} {'microbatches':>12} {'throughput':>20} {'bubble':>8} {'peak memory':>12}  OOM")
    best = None
    for name, points in results.items():
        for m, run in points:
            print(f"{name:<12} {m:>12} {run.throughput_samples_per_s:>10.1f} samples/s {100 * run.bubble_fraction:>7.2f}% "
                  f"{run.peak_memory_bytes / 2**30:>8.2f} GiB  {'OOM' if run.oom else 'no'}")
            if not run.oom and (best is None or run.throughput_samples_per_s > best[1].throughput_samples_per_s):
                best = (m, run)
    plot_path = Path(args.plot) if args.plot else Path(args.out).with_suffix(".png")
    plot(f"{scenario.name}: {scenario.ranks} ranks on {scenario.device}", results, scenario.device_memory_bytes,
         plot_path)
    if best is None:
        print("no schedule fits in device memory at any of these microbatch counts")
        return 2

    m, run = best
    # The same schedule for one step, as PyTorch's schedule runs it, and its compute actions.
    (one_step,) = stagecraft.simulate(scenario.with_overrides(
        {"pipeline.schedule": run.schedule, "pipeline.microbatches": m, "pipeline.steps": 1}))
    Path(args.out).write_text(one_step.ir().to_csv())
    print(f"best: {run.schedule} with {m} microbatches, {run.throughput_samples_per_s:.1f} samples/s, "
          f"peak memory {run.peak_memory_bytes / 2**30:.2f} GiB; wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
