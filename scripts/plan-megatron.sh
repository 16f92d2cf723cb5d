#!/usr/bin/env bash
# Checks `stagecraft plan` against what experts chose: for each row of Megatron-LM's SC'21 Table 1
# (data/megatron_sc21_table1.csv: ten GPT models, 1.7B to 1T parameters, on 32 to 3,072
# A100s of Selene), plans the row's model on its GPUs and global batch (device A100-SXM-80GB,
# Selene's topology, every layer recomputed as the paper did: scenarios/published/
# megatron-sc21.yaml sized like scripts/validate-published.sh does), predicts the paper's own
# layout with the same simulator, and prints both in TFLOP/s per GPU (the paper's FLOP count),
# whether the plan's best is at least as fast (it must be: the paper's layout is in the plan's
# space, so a slower best is a bug in the enumeration or the pruning) and where they differ.
# Exits 1 when a row's plan is slower than the paper's layout.
# Usage: scripts/plan-megatron.sh [--rows 1,2,...] [PLAN FLAGS...]   (--rows: 1-based rows only)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
sc="${STAGECRAFT:-$root/build/cli/stagecraft}"   # STAGECRAFT=BINARY runs another build
[[ -x "$sc" ]] || "$root/scripts/build.sh" >/dev/null
tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
PYTHONPATH="$root/scripts${PYTHONPATH:+:$PYTHONPATH}" \
python3 - "$sc" "$root/scenarios/published/megatron-sc21.yaml" "$root/data/megatron_sc21_table1.csv" "$tmp" "$@" <<'PY'
import json, subprocess, sys, time
import megatron_sc21
sc, scenario, table, tmp, *extra = sys.argv[1:]
rows_wanted = None
if extra[:1] == ["--rows"]:
    rows_wanted = {int(x) for x in extra[1].split(",")}
    extra = extra[2:]
KEYS = ["schedule", "ranks", "data_parallel", "tensor_parallel", "microbatch_size", "microbatches", "chunks", "zero",
        "partition"]
SHORT = {"ranks": "P", "data_parallel": "D", "tensor_parallel": "T", "microbatch_size": "b", "microbatches": "m",
         "chunks": "v", "zero": "zero", "partition": "", "schedule": ""}

def describe(layout):
    return " ".join(f"{SHORT[k]}{layout[k]}" if SHORT[k] else str(layout[k]) for k in KEYS)

print(f"{'model':>8} {'gpus':>5}  {'plan best (TFLOP/s per GPU)':<58} {'paper layout':<46} {'plan/paper':>10}  ok  "
      f"{'configs':>8} {'simulated':>9} {'s':>6}  differs in")
bad = 0
total = time.time()
for index, r in enumerate(megatron_sc21.rows(table), 1):
    if rows_wanted and index not in rows_wanted:
        continue
    gpus, batch = r.gpus, r.global_batch
    paper = dict(r.layout, zero=0, partition="even")
    sets = r.model_sets()
    start = time.time()
    plan = subprocess.run([sc, "plan", scenario, *sets, "--gpus", str(gpus), "--global-batch", str(batch),
                           "--recompute", "full", "--refine", "0", "--json", f"{tmp}/plan.json", *extra],
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    seconds = time.time() - start
    if plan.returncode != 0:
        print(f"{r.params_b + 'B':>8} {gpus:>5}  plan failed: {plan.stderr.strip()}")
        bad += 1
        continue
    with open(f"{tmp}/plan.json") as fh:
        planned = json.load(fh)
    best = planned["configurations"][0]
    sim = subprocess.run([sc, "simulate", scenario, *sets, *r.layout_sets(paper), "--json", f"{tmp}/paper.json"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    tflops = lambda ms: r.flops() / (ms / 1e3) / gpus / 1e12
    best_ms = best["metrics"]["step_time_ms"]
    plan_text = f"{describe(best['layout'])} {tflops(best_ms):6.1f}"
    if sim.returncode != 0:
        print(f"{r.params_b + 'B':>8} {gpus:>5}  {plan_text:<58} paper layout failed: {sim.stderr.strip()}")
        bad += 1
        continue
    with open(f"{tmp}/paper.json") as fh:
        paper_metrics = json.load(fh)["schedules"][0]
    paper_ms = paper_metrics["step_time_ms"]
    paper_oom = paper_metrics["oom"]
    ok = best_ms <= paper_ms
    bad += 0 if ok else 1
    differs = [f"{SHORT[k] or k} {paper[k]}->{best['layout'][k]}" for k in KEYS if best["layout"][k] != paper[k]]
    paper_text = f"{describe(paper)} {tflops(paper_ms):6.1f}{' OOM' if paper_oom else ''}"
    print(f"{r.params_b + 'B':>8} {gpus:>5}  {plan_text:<58} {paper_text:<46} {paper_ms / best_ms:>9.3f}x  "
          f"{'yes' if ok else 'NO ':<3} {planned['enumerated']:>8} {planned['simulated']:>9} {seconds:>6.1f}  "
          f"{', '.join(differs) or 'the same layout'}")
    sys.stdout.flush()
print(f"{'all rows' if not rows_wanted else 'rows'}: {time.time() - total:.1f} s; "
      f"{'the plan is at least as fast as the paper on every row' if bad == 0 else f'{bad} row(s) where it is not'}")
sys.exit(0 if bad == 0 else 1)
PY
