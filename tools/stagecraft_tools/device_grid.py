"""How far the A100's constants carry the roofline model (docs/cost-model.md): a grid over
scenarios/devices/A100-SXM-80GB.yaml's fitted constants (each a --set under topology.device on
every scenario), and at each point Megatron-LM's SC'21 Table 1 as validate-published predicts it
(median and largest |error|; targets 5% and 10%) and the Zero Bubble paper's profile (its Table 3
models, a middle stage): predicted B/F and W/F against its Appendix D (target within 10%).
Prints the points that meet Megatron-LM's targets, best Zero Bubble fit first, then the best Zero
Bubble fits whatever Megatron-LM's error. A benchmark of the model: exits 0 whatever the numbers."""
import itertools
from concurrent.futures import ProcessPoolExecutor

from . import common, published, tables

GRID = {"gemm.max_efficiency": ["0.65", "0.7", "0.75", "0.8", "0.85"],
        "gemm.batched_efficiency": ["0.4", "0.55", "0.7", "0.85", "1.0"],
        "memory_efficiency": ["0.55", "0.65", "0.75", "0.85", "0.95"]}


def parse_axis(text):
    """"KEY=V1,V2,..." as (KEY, [V1, V2, ...]); commas inside a flow map ({a: 1, b: 2}) belong to
    the value."""
    key, _, values = text.partition("=")
    if not key or not values:
        raise common.usage_error(f"'{text}': expected KEY=V1,V2,...")
    depth, parts, part = 0, [], ""
    for ch in values:
        depth += (ch == "{") - (ch == "}")
        if ch == "," and depth == 0:
            parts.append(part)
            part = ""
        else:
            part += ch
    return key, parts + [part]


def zb_scenario(model):
    """The Zero Bubble paper's run of a Table 3 model (ZbModel) as scenario YAML."""
    name, layers, heads, hidden, mb, p = model
    return ("name: zb\n"
            f"topology: {{device: A100-SXM-80GB, nodes: {max(1, p // 8)}, devices_per_node: 8, links: "
            "[{scope: node, bandwidth: 300GB/s, latency: 2us}, {scope: cluster, bandwidth: 200Gbps, latency: 5us}]}\n"
            f"model: {{transformer: {{layers: {layers}, hidden: {hidden}, heads: {heads}, seq: {tables.ZB_SEQ}, "
            "vocab: 50304}}\n"
            f"pipeline: {{schedule: 1f1b, ranks: {p}, microbatches: 24, microbatch_size: {mb}, steps: 1, "
            f"partition: {tables.stage_layers(layers, p)}}}\n"
            "training: {optimizer: adam, lr: 0.0001, dtype: fp16}\n")


def evaluate(point):
    """(point, Megatron-LM's errors, per Zero Bubble model (B/F, W/F) predicted over the paper's - 1)."""
    sets = [f"topology.device.{k}={v}" for k, v in point.items()]
    errors = [e for _, _, e in published.megatron_predictions(sets)]
    paper = tables.zb_pass_times()
    ratios = []
    for model in tables.zb_models().values():
        st = common.simulate(None, sets, text=zb_scenario(model))[0]["stages"][model.gpus // 2]
        pf, pb, pw = paper[model.name]
        f = st["forward_ms"]
        ratios.append((st["backward_input_ms"] / f / (pb / pf) - 1, st["backward_weight_ms"] / f / (pw / pf) - 1))
    return point, errors, ratios


def line(point, errors, ratios):
    """(the worst Zero Bubble ratio, the point's report line)."""
    zb = common.max_abs([x for pair in ratios for x in pair])
    return (zb, f"ZB worst {100 * zb:5.1f}%  B/F " + " ".join(f"{100 * b:+4.0f}" for b, _ in ratios)
            + "  W/F " + " ".join(f"{100 * w:+4.0f}" for _, w in ratios)
            + f"  | Megatron median {100 * common.median_abs(errors):4.1f}% largest {100 * common.max_abs(errors):4.1f}%  "
            + " ".join(f"{k}={v}" for k, v in point.items()))


def report(results, points):
    meets = [line(*r) for r in results if published.within([abs(e) for e in r[1]])]
    out = [f"{points} points; {len(meets)} meet Megatron-LM's targets (median <= 5%, largest <= 10%); "
           "ZB: predicted / paper - 1 for 1.5B 6.2B 14.6B 28.3B (target within 10%)"]
    out += ["  " + text for _, text in sorted(meets)[:8]]
    out.append("best Zero Bubble fits, whatever Megatron-LM's error:")
    out += ["  " + text for _, text in sorted(line(*r) for r in results)[:5]]
    return out


def main(argv):
    parser = common.ArgumentParser(prog="device-grid.sh", description=__doc__.splitlines()[0])
    parser.add_argument("jobs", nargs="?", default="2", help="processes (default 2)")
    parser.add_argument("axes", nargs="*", metavar="KEY=V1,V2,...", help="the grid (default: three constants, 125 points)")
    args = parser.parse_args(argv)
    jobs = common.positive_int(args.jobs, "JOBS")
    grid = dict(parse_axis(a) for a in args.axes) if args.axes else GRID
    points = [dict(zip(grid, v)) for v in itertools.product(*grid.values())]
    results = [evaluate(points[0])]  # here first: a bad key or value stops the grid with simulate's own line
    if len(points) > 1:
        with ProcessPoolExecutor(jobs) as ex:
            results += list(ex.map(evaluate, points[1:]))
    print("\n".join(report(results, len(points))))
    return 0


if __name__ == "__main__":
    raise SystemExit(common.entry("device-grid", main))
