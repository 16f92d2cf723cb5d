"""Checks `stagecraft plan` against what experts chose: for each row of Megatron-LM's SC'21
Table 1 (data/megatron_sc21_table1.csv), plans the row's model on its GPUs and global batch
(scenarios/published/megatron-sc21.yaml, every layer recomputed as the paper did), predicts the
paper's own layout with the same simulator, and prints both in TFLOP/s per GPU (the paper's FLOP
count). The plan's best must be at least as fast: the paper's layout is in the plan's space, so a
slower best is a bug in the enumeration or the pruning. Exits 1 when a row's plan is slower."""
import tempfile
import time
from pathlib import Path

from . import common, published, tables

KEYS = ["schedule", "ranks", "data_parallel", "tensor_parallel", "microbatch_size", "microbatches", "chunks", "zero",
        "partition"]
SHORT = {"ranks": "P", "data_parallel": "D", "tensor_parallel": "T", "microbatch_size": "b", "microbatches": "m",
         "chunks": "v", "zero": "zero", "partition": "", "schedule": ""}


def describe(layout):
    """A layout in one short line: "1f1b P2 D32 T8 b4 m12 v1 zero0 even"."""
    return " ".join(f"{SHORT[k]}{layout[k]}" if SHORT[k] else str(layout[k]) for k in KEYS)


def differences(paper, best):
    """Where the plan's best layout differs from the paper's: ["T 8->4", ...]."""
    return [f"{SHORT[k] or k} {paper[k]}->{best[k]}" for k in KEYS if best[k] != paper[k]]


def check_row(r, plan_flags, tmp):
    """One row planned and its paper layout predicted: (report line, ok)."""
    paper = dict(r.layout, zero=0, partition="even")
    start = time.time()
    common.run([common.cli(), "plan", published.SCENARIO, *common.sets(r.model_sets()), "--gpus", r.gpus,
                "--global-batch", r.global_batch, "--recompute", "full", "--refine", "0", "--json", tmp / "plan.json",
                *plan_flags])
    seconds = time.time() - start
    planned = common.read_json(tmp / "plan.json")
    best = planned["configurations"][0]
    paper_metrics = common.simulate(published.SCENARIO, [*r.model_sets(), *r.layout_sets(paper)])[0]
    tflops = lambda ms: r.flops() / (ms / 1e3) / r.gpus / 1e12
    best_ms, paper_ms = best["metrics"]["step_time_ms"], paper_metrics["step_time_ms"]
    ok = best_ms <= paper_ms
    plan_text = f"{describe(best['layout'])} {tflops(best_ms):6.1f}"
    paper_text = f"{describe(paper)} {tflops(paper_ms):6.1f}{' OOM' if paper_metrics['oom'] else ''}"
    return (f"{r.params_b + 'B':>8} {r.gpus:>5}  {plan_text:<58} {paper_text:<46} {paper_ms / best_ms:>9.3f}x  "
            f"{'yes' if ok else 'NO ':<3} {planned['enumerated']:>8} {planned['simulated']:>9} {seconds:>6.1f}  "
            f"{', '.join(differences(paper, best['layout'])) or 'the same layout'}"), ok


def parse_rows(text, count):
    """"1,3" as {1, 3}, each within 1..count; a usage error otherwise."""
    try:
        wanted = {int(x) for x in text.split(",")}
    except ValueError:
        wanted = set()
    if not wanted or not all(1 <= k <= count for k in wanted):
        raise common.usage_error(f"--rows {text}: expected row numbers 1..{count}, comma-separated")
    return wanted


def main(argv):
    parser = common.ArgumentParser(prog="plan-megatron.sh", description=__doc__.splitlines()[0])
    parser.add_argument("--rows", help="1-based rows of Table 1 only, e.g. 1,2")
    args, plan_flags = parser.parse_known_args(argv)
    rows = tables.megatron_rows()
    wanted = parse_rows(args.rows, len(rows)) if args.rows else None
    common.cli()  # missing: say so before the header
    print(f"{'model':>8} {'gpus':>5}  {'plan best (TFLOP/s per GPU)':<58} {'paper layout':<46} {'plan/paper':>10}  ok  "
          f"{'configs':>8} {'simulated':>9} {'s':>6}  differs in", flush=True)
    bad, total = 0, time.time()
    with tempfile.TemporaryDirectory() as tmp:
        for index, r in enumerate(rows, 1):
            if wanted and index not in wanted:
                continue
            text, ok = check_row(r, plan_flags, Path(tmp))
            bad += not ok
            print(text, flush=True)
    print(f"{'all rows' if not wanted else 'rows'}: {time.time() - total:.1f} s; "
          f"{'the plan is at least as fast as the paper on every row' if bad == 0 else f'{bad} row(s) where it is not'}")
    return 0 if bad == 0 else 1


if __name__ == "__main__":
    raise SystemExit(common.entry("plan-megatron", main))
