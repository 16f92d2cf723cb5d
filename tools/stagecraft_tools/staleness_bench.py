"""Asynchronous pipelines judged by what users pay for (issue 55): every schedule's samples per
second, peak memory and time to the scenario's target loss, on 2 and 4 CPU ranks, for GPipe,
1F1B, PipeDream, PipeDream-2BW and PipeMare without and with each of its techniques.

Each variant is one `stagecraft execute` of the scenario (default scenarios/gpt-text-cpu.yaml, a
byte-level GPT learning the GPL's text; its training block states the target loss). 4 ranks run
on this machine's cores as 2 ranks per core (pipeline.ranks_per_device 2) when it has fewer than
4. The table states beside each PipeMare variant its memory against PipeDream's on the same ranks
(the paper: no stash, so PipeDream's extra weight versions are gone) and whether each technique
brought the time to target down (the paper: rescheduling and correction recover the accuracy
that staleness costs). One run per variant on a shared machine: compare within a table, and
read the samples/s spread the machine shows between schedules that do the same work.

Usage: scripts/staleness-bench.sh [--ranks 2,4] [--steps N] [--set KEY=VALUE]... [--out DIR]
[SCENARIO]. Exits 0 with the table (a benchmark), 1 with one line when a run fails.
"""
import os
from pathlib import Path

from . import common

# (label, schedule, training.pipemare or None)
VARIANTS = [
    ("gpipe", "gpipe", None),
    ("1f1b", "1f1b", None),
    ("pipedream", "pipedream", None),
    ("2bw", "2bw", None),
    ("pipemare", "pipemare", None),
    ("pipemare+resched", "pipemare", "{lr_reschedule_steps: 10}"),
    ("pipemare+correct", "pipemare", "{correction: true}"),
    ("pipemare+both", "pipemare", "{lr_reschedule_steps: 10, correction: true}"),
]


def variant_sets(ranks, schedule, pipemare, cores):
    """The overrides of one variant on `ranks` ranks of a machine with `cores` cores."""
    out = [f"pipeline.ranks={ranks}", f"pipeline.schedule={schedule}"]
    per_core = 1 if ranks <= cores else -(-ranks // cores)
    out += [f"topology.devices_per_node={-(-ranks // per_core)}", f"pipeline.ranks_per_device={per_core}"]
    if pipemare is not None:
        out.append(f"training.pipemare={pipemare}")
    return out


def row_of(label, ranks, doc):
    """One table row from an execute JSON of one schedule."""
    s = doc["schedules"][0]
    losses = s.get("losses") or []
    if "target_loss" not in s:
        raise common.ToolError(f"{label} on {ranks} ranks: the run has no target_loss (state training.target_loss)")
    peak = max(r["peak_memory_bytes"] for r in s["per_rank"])
    reached = s["target_reached_step"]
    return {"label": label, "ranks": ranks, "samples_per_s": s["throughput_samples_per_s"], "peak_bytes": peak,
            "reached_step": reached, "time_s": None if reached is None else s["time_to_target_ms"] / 1e3,
            "first_loss": losses[0] if losses else None, "last_loss": losses[-1] if losses else None, "steps": len(losses), "target": s["target_loss"],
            "window": s["loss_window"]}


def diverged_row(label, ranks, log):
    """The row of a run that stopped because its loss went non-finite (execute's "training
    diverged"), from its log: what it says, where; None when the log says something else."""
    text = Path(log).read_text() if Path(log).is_file() else ""
    line = next((l for l in text.splitlines() if "training diverged" in l), None)
    if line is None:
        return None
    where = next((part for part in line.split(": ") if part.startswith("step ")), "a step")  # "step 9 microbatch 7"
    return {"label": label, "ranks": ranks, "diverged": where}


def mib(b):
    return f"{b / 2**20:.2f} MiB"


def findings(rows):
    """What the paper reports, against these runs: per rank count, PipeMare's memory against
    PipeDream's, and whether each technique shortened the time to target."""
    out = []
    for ranks in sorted({r["ranks"] for r in rows}):
        by = {r["label"]: r for r in rows if r["ranks"] == ranks and "diverged" not in r}
        for r in rows:
            if r["ranks"] == ranks and "diverged" in r:
                out.append(f"{ranks} ranks: {r['label']} diverged ({r['diverged']})")
        if "pipedream" in by and "pipemare" in by:
            d, m = by["pipedream"]["peak_bytes"], by["pipemare"]["peak_bytes"]
            out.append(f"{ranks} ranks: PipeMare's peak {mib(m)} against PipeDream's {mib(d)} "
                       f"({100 * (m / d - 1):+.1f}%): {'lower, as the paper reports' if m < d else 'not lower'}")
        every = {r["label"]: r for r in rows if r["ranks"] == ranks}
        base = every.get("pipemare")
        for label in ("pipemare+resched", "pipemare+correct", "pipemare+both"):
            v = every.get(label)
            if base is None or v is None or "diverged" in v:
                continue
            if "diverged" in base:
                fell = v["last_loss"] is not None and v["first_loss"] is not None and v["last_loss"] < v["first_loss"]
                verdict = (f"better: it trained (loss {v['first_loss']:.4g} to {v['last_loss']:.4g}) where plain PipeMare "
                           f"diverged" if fell else f"no better: its loss rose to {v['last_loss']:.4g} (plain PipeMare "
                           f"diverged)")
            elif v["time_s"] is None and base["time_s"] is None:
                verdict = "neither reached the target"
            elif v["time_s"] is None:
                verdict = "worse: it did not reach the target, plain PipeMare did"
            elif base["time_s"] is None:
                verdict = "better: it reached the target, plain PipeMare did not"
            else:
                verdict = (f"{'better' if v['reached_step'] < base['reached_step'] else 'not better'} in steps "
                           f"({v['reached_step'] + 1} against {base['reached_step'] + 1})")
            out.append(f"{ranks} ranks: {label} against plain pipemare: {verdict}")
    return out


def table(rows):
    """The markdown table of `rows`."""
    lines = ["| ranks | schedule | samples/s | peak memory (largest rank) | time to target | reached at step | "
             "last loss |", "| ---: | --- | ---: | ---: | ---: | ---: | ---: |"]
    for r in rows:
        if "diverged" in r:
            lines.append(f"| {r['ranks']} | {r['label']} | - | - | diverged ({r['diverged']}) | - | - |")
            continue
        reached = "not reached" if r["time_s"] is None else f"{r['time_s']:.2f} s"
        step = "-" if r["reached_step"] is None else f"{r['reached_step'] + 1} of {r['steps']}"
        last = "-" if r["last_loss"] is None else f"{r['last_loss']:.4f}"
        lines.append(f"| {r['ranks']} | {r['label']} | {r['samples_per_s']:.1f} | {mib(r['peak_bytes'])} | {reached} | "
                     f"{step} | {last} |")
    return lines


def main(argv):
    parser = common.ArgumentParser(prog="staleness-bench.sh", description=__doc__.splitlines()[0])
    parser.add_argument("scenario", nargs="?", default=str(common.SCENARIOS / "gpt-text-cpu.yaml"))
    parser.add_argument("--ranks", default="2,4", help="pipeline rank counts, comma-separated (default 2,4)")
    parser.add_argument("--steps", help="pipeline.steps for every run (default the scenario's)")
    parser.add_argument("--variants", help="labels to run, comma-separated (default every one)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="an override for every run")
    parser.add_argument("--out", default=str(common.build_dir() / "out" / "staleness"), help="output folder")
    args = parser.parse_args(argv)
    if not Path(args.scenario).is_file():
        raise common.usage_error(f"{args.scenario}: no such scenario")
    ranks_list = [common.positive_int(r, "--ranks") for r in args.ranks.split(",")]
    extra = list(args.set) + ([f"pipeline.steps={common.positive_int(args.steps, '--steps')}"] if args.steps else [])
    variants = VARIANTS
    if args.variants:
        wanted = args.variants.split(",")
        unknown = [w for w in wanted if w not in [v[0] for v in VARIANTS]]
        if unknown:
            raise common.usage_error(f"--variants: {', '.join(unknown)}: not among {', '.join(v[0] for v in VARIANTS)}")
        variants = [v for v in VARIANTS if v[0] in wanted]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    cores = os.cpu_count() or 1
    print(f"scenario {args.scenario}: {len(variants)} variant(s) on {args.ranks} ranks, {cores} cores, "
          f"1-minute load {common.load1()} at the start", flush=True)
    rows = []
    for ranks in ranks_list:
        for label, schedule, pipemare in variants:
            path = out / f"{label}.{ranks}.json"
            sets = variant_sets(ranks, schedule, pipemare, cores) + extra
            log = out / f"{label}.{ranks}.log"
            try:
                common.mpirun(ranks, [common.cli(), "execute", args.scenario, *common.sets(sets), "--json", path], log)
            except common.ToolError:
                row = diverged_row(label, ranks, log)  # a result of the comparison, not a failure of it
                if row is None:
                    raise
                rows.append(row)
                print(f"  {ranks} ranks {label}: diverged", flush=True)
                continue
            rows.append(row_of(label, ranks, common.read_json(path)))
            print(f"  {ranks} ranks {label}: done", flush=True)
    first = next((r for r in rows if "diverged" not in r), None)
    head = "every run diverged" if first is None else f"target: training loss {first['target']:g} (mean of {first['window']} steps)"
    lines = [head, "", *table(rows), "",
             *findings(rows)]
    common.write_text(out / "report.md", "\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(common.entry("staleness-bench", main))
