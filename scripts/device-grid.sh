#!/usr/bin/env bash
# How far the A100's constants can carry the roofline model (docs/cost-model.md): a grid over
# scenarios/devices/A100-SXM-80GB.yaml's fitted constants (GEMM max_efficiency,
# batched_efficiency, memory_efficiency; each --set on every scenario), and at each point
#   - Megatron-LM's SC'21 Table 1 as scripts/validate-published.sh predicts it (median and
#     largest |error| of TFLOP/s per GPU; issue 30's targets 5% and 10%), and
#   - the Zero Bubble paper's profile (its Table 3 models, a middle stage, as
#     tests/sim/roofline_test.cpp builds them): predicted B/F and W/F against its Appendix D
#     (target: within 10%).
# Prints the points that meet Megatron-LM's targets, best Zero Bubble fit first, and the best
# Zero Bubble fits whatever Megatron-LM's error. A benchmark of the model, not a test: exits 0
# whatever the numbers. About 1 s per point per core (125 points by default).
# Usage: scripts/device-grid.sh [JOBS] [KEY=V1,V2,...]...   (default 2 jobs and the grid below;
# a KEY is under topology.device, e.g. gemm.max_efficiency=0.7,0.8 memory_efficiency=0.75)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
sc="${STAGECRAFT:-$root/build/cli/stagecraft}"
[[ -x "$sc" ]] || "$root/scripts/build.sh" >/dev/null
jobs="${1:-2}"
[[ "$jobs" =~ ^[1-9][0-9]*$ ]] || { echo "usage: $0 [JOBS] [KEY=V1,V2,...]..." >&2; exit 2; }
shift || true
tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
PYTHONPATH="$root/scripts${PYTHONPATH:+:$PYTHONPATH}" \
python3 - "$sc" "$root" "$tmp" "$jobs" "$@" <<'PY'
import itertools, json, os, statistics, subprocess, sys
from concurrent.futures import ProcessPoolExecutor
import megatron_sc21
import zero_bubble_paper  # the Zero Bubble paper's Table 3 models and its profile's medians
sc, root, tmp, jobs, *axes = sys.argv[1:]
grid = {"gemm.max_efficiency": ["0.65", "0.7", "0.75", "0.8", "0.85"],
        "gemm.batched_efficiency": ["0.4", "0.55", "0.7", "0.85", "1.0"],
        "memory_efficiency": ["0.55", "0.65", "0.75", "0.85", "0.95"]}
if axes:
    grid = {}
    for a in axes:
        key, _, values = a.partition("=")
        if not key or not values:
            sys.exit(f"device-grid: '{a}': expected KEY=V1,V2,...")
        depth, parts, part = 0, [], ""
        for ch in values:  # commas inside a flow map ({a: 1, b: 2}) belong to the value
            depth += (ch == "{") - (ch == "}")
            if ch == "," and depth == 0:
                parts.append(part)
                part = ""
            else:
                part += ch
        grid[key] = parts + [part]
rows = megatron_sc21.rows(f"{root}/data/megatron_sc21_table1.csv")
ZB = list(zero_bubble_paper.models().values())
paper = zero_bubble_paper.pass_times()
for name, layers, heads, hidden, mb, p in ZB:
    with open(f"{tmp}/zb-{name}.yaml", "w") as fh:
        fh.write("name: zb\n"
                 f"topology: {{device: A100-SXM-80GB, nodes: {max(1, p // 8)}, devices_per_node: 8, links: "
                 "[{scope: node, bandwidth: 300GB/s, latency: 2us}, {scope: cluster, bandwidth: 200Gbps, latency: 5us}]}\n"
                 f"model: {{transformer: {{layers: {layers}, hidden: {hidden}, heads: {heads}, seq: {zero_bubble_paper.SEQ}, "
                 "vocab: 50304}}\n"
                 f"pipeline: {{schedule: 1f1b, ranks: {p}, microbatches: 24, microbatch_size: {mb}, steps: 1, "
                 f"partition: {zero_bubble_paper.stage_layers(layers, p)}}}\n"
                 "training: {optimizer: adam, lr: 0.0001, dtype: fp16}\n")

def simulate(args):
    out = f"{tmp}/{os.getpid()}.json"
    r = subprocess.run([sc, "simulate", *args, "--json", out], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        raise RuntimeError((r.stderr.strip().splitlines() or ["simulate failed"])[-1])
    with open(out) as fh:
        return json.load(fh)["schedules"][0]

def evaluate(point):
    sets = sum((["--set", f"topology.device.{k}={v}"] for k, v in point.items()), [])
    errors = []
    for r in rows:
        s = simulate([f"{root}/scenarios/published/megatron-sc21.yaml", *r.model_sets(), *r.layout_sets(), *sets])
        errors.append(r.flops() / (s["step_time_ms"] / 1e3) / r.gpus / 1e12 / r.tflops_per_gpu - 1)
    ratios = []  # per model: B/F and W/F, predicted over the paper's, minus 1
    for name, *_, p in ZB:
        st = simulate([f"{tmp}/zb-{name}.yaml", *sets])["stages"][p // 2]
        pf, pb, pw = paper[name]
        f = st["forward_ms"]
        ratios.append((st["backward_input_ms"] / f / (pb / pf) - 1, st["backward_weight_ms"] / f / (pw / pf) - 1))
    return point, errors, ratios

points = [dict(zip(grid, v)) for v in itertools.product(*grid.values())]
try:
    results = [evaluate(points[0])]  # here first: a bad key or value stops the grid with simulate's own line
    with ProcessPoolExecutor(int(jobs)) as ex:
        results += list(ex.map(evaluate, points[1:]))
except RuntimeError as e:
    sys.exit(f"device-grid: {e}")
def line(point, errors, ratios):
    zb = max(abs(x) for pair in ratios for x in pair)
    return (zb, f"ZB worst {100 * zb:5.1f}%  B/F " + " ".join(f"{100 * b:+4.0f}" for b, _ in ratios)
            + "  W/F " + " ".join(f"{100 * w:+4.0f}" for _, w in ratios)
            + f"  | Megatron median {100 * statistics.median(map(abs, errors)):4.1f}% largest {100 * max(map(abs, errors)):4.1f}%  "
            + " ".join(f"{k}={v}" for k, v in point.items()))
meets = [line(*r) for r in results if statistics.median(map(abs, r[1])) <= 0.05 and max(map(abs, r[1])) <= 0.10]
print(f"{len(points)} points; {len(meets)} meet Megatron-LM's targets (median <= 5%, largest <= 10%); "
      "ZB: predicted / paper - 1 for 1.5B 6.2B 14.6B 28.3B (target within 10%)")
for _, text in sorted(meets)[:8]:
    print("  " + text)
print("best Zero Bubble fits, whatever Megatron-LM's error:")
for _, text in sorted(line(*r) for r in results)[:5]:
    print("  " + text)
PY
