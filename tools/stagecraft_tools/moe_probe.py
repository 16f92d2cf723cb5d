"""A mixture-of-experts layer's expert GEMMs timed on a GPU with PyTorch at several rows per expert,
beside the roofline model's prediction of the same GEMMs (`stagecraft simulate --explain-json`, the
MoE block's `expert.*` kernels), so that the device file's rate for grouped GEMMs can be measured
rather than fitted.

Why: issue 56's published Qwen3-235B rows are predicted within 5% where each local expert gets 4,096
routed rows per microbatch and 44-81% fast where it gets 512-1,024 (docs/results/moe-published.md).
The roofline rates a batch of G experts' GEMMs of R rows as one batched GEMM of G x R rows; whether a
real grouped GEMM's rate falls with R, and by how much, is what this probe measures. Routing here is
even (every expert R rows): the imbalance of a trained router is not in it.

The GEMMs of one SwiGLU expert MLP (hidden h, expert width f), as the list names them:
  F  expert.fc      [R, h] x [h, 2f]     expert.fc2     [R, f] x [f, h]
  I  expert.fc2.dX  [R, h] x [h, f]      expert.fc.dX   [R, 2f] x [2f, h]
  W  expert.fc2.dW  [f, R] x [R, h]      expert.fc.dW   [h, R] x [R, 2f]
each timed for all G experts together, two ways: "loop", one torch.mm per expert on one stream
(Megatron-LM's SequentialMLP; a grouped GEMM made of per-expert cuBLAS calls), and "grouped",
torch._grouped_mm (one kernel over all experts; PyTorch 2.8 and later on Hopper), where it runs.
Each is timed between CUDA events with the queue kept full (a sleep kernel first), the median of
--reps. The report adds the prediction and the implied rate of each. With --dtype fp8 (training.fp8:
the FP8 peak the device file states, never measured before) the loop's GEMMs are
torch._scaled_mm's, E4M3 operands and bf16 results, checked against the bf16 product before they
are timed; the grouped way is not run, and the casts are not timed (the model lists them apart).

Usage (python3 -m stagecraft_tools.moe_probe, tools/ on PYTHONPATH; scripts/moe-probe.sh runs both):
  moe_probe.py --check              the loop's GEMMs against a float64 per-expert reference (CPU, tiny
                                    shapes); the grouped one is checked against the loop on the GPU,
                                    before it is timed
  moe_probe.py [--cases 16x512,...] [--hidden 4096] [--ffn 1536] [--reps N] [--dtype bf16|fp16|fp8]
               [--out FILE.json]    time on the GPU; prints "SKIPPED: ..." and exits 0 without
                                    PyTorch or a CUDA device
  moe_probe.py report PROBE.json --out DIR [--device-file NAME] [--set K=V]...
                                    the report (no PyTorch needed; $STAGECRAFT or the build's stagecraft)
"""
import json
import os
import subprocess
import sys
import tempfile

from . import block, common

try:
    import torch
except ImportError:  # the probe is optional: the build and tests never need PyTorch
    torch = None

# Qwen3-235B-A22B's expert (hidden 4096, expert width 1536, SwiGLU) at the rows per expert of the
# published rows: 512 (TP 4, EP 8), 1,024 (TP 2, PP 32, EP 8), 4,096 (TP 2, EP 32), and between.
CASES = "16x512,16x1024,8x2048,4x4096"
# (pass, name, rows of A, inner, columns of B) of each GEMM, in units of (R, h, f); A is [m, k], B [k, n].
GEMMS = (("F", "expert.fc", "R", "h", "2f"), ("F", "expert.fc2", "R", "f", "h"),
         ("I", "expert.fc2.dX", "R", "h", "f"), ("I", "expert.fc.dX", "R", "2f", "h"),
         ("W", "expert.fc2.dW", "f", "R", "h"), ("W", "expert.fc.dW", "h", "R", "2f"))


def parse_cases(text):
    """[(groups, rows)] of "GxR,GxR"; a usage error names a bad one."""
    return block.parse_cases(text, "GROUPSxROWS, both positive", lambda g, r: g > 0 and r > 0)


def dims(shape, r, h, f):
    return {"R": r, "h": h, "f": f, "2f": 2 * f}[shape]


def operands(groups, r, h, f, spec, dtype, device, gen):
    """The A and B of one GEMM for every expert: [G, m, k] and [G, k, n]."""
    _, _, m, k, n = spec
    m, k, n = (dims(x, r, h, f) for x in (m, k, n))

    def rand(*shape):
        return (torch.randn(*shape, generator=gen, dtype=torch.float64) * 0.1).to(device=device, dtype=dtype)
    return rand(groups, m, k), rand(groups, k, n)


def loop_mm(a, b, out):
    for g in range(a.shape[0]):
        torch.mm(a[g], b[g], out=out[g])
    return out


def grouped_call(a, b):
    """A call of torch._grouped_mm over the experts for the GEMMs whose rows are the routed ones (F
    and I): A's [G·m, k] rows cut at the experts' offsets against B's [G, k, n], into [G·m, n];
    its offsets made here, outside the call. None where it does not run (PyTorch before 2.8, a
    device or dtype it does not support) or gives other results than the per-expert GEMMs."""
    fn = getattr(torch, "_grouped_mm", None)
    if fn is None:
        return None
    groups, m, k = a.shape
    rows = a.reshape(groups * m, k)
    offs = torch.arange(1, groups + 1, device=a.device, dtype=torch.int32) * m
    try:
        got = fn(rows, b, offs=offs).reshape(groups, m, b.shape[2]).float()
    except RuntimeError:
        return None
    want = torch.bmm(a.float(), b.float())
    if not torch.allclose(got, want, rtol=2e-2, atol=2e-2 * want.abs().max().item()):
        print(f"moe_probe: torch._grouped_mm differs from the per-expert GEMMs ({groups} x {m}): not timed",
              file=sys.stderr)
        return None
    return lambda: fn(rows, b, offs=offs)


def fp8_call(a, b):
    """The per-expert FP8 GEMMs of bf16 operands `a` [G, m, k] and `b` [G, k, n] (torch._scaled_mm:
    A row-major, B column-major, unit scales, bf16 results), or None where they do not run (no
    float8 type or _scaled_mm in this PyTorch, a device without FP8) or differ from the bf16
    product by more than FP8's rounding."""
    fn, e4m3 = getattr(torch, "_scaled_mm", None), getattr(torch, "float8_e4m3fn", None)
    if fn is None or e4m3 is None:
        return None
    one = torch.ones((), device=a.device, dtype=torch.float32)
    a8 = [a[g].to(e4m3) for g in range(a.shape[0])]
    b8 = [b[g].to(e4m3).t().contiguous().t() for g in range(b.shape[0])]  # column-major, as cuBLASLt wants

    def run():
        return [fn(a8[g], b8[g], scale_a=one, scale_b=one, out_dtype=torch.bfloat16) for g in range(len(a8))]
    try:
        got = torch.stack(run()).float()
    except (RuntimeError, TypeError) as e:
        print(f"moe_probe: torch._scaled_mm does not run here ({e}): FP8 not timed", file=sys.stderr)
        return None
    want = torch.bmm(a.float(), b.float())
    if not torch.allclose(got, want, rtol=0.1, atol=0.1 * want.abs().max().item()):
        print(f"moe_probe: the FP8 GEMMs differ from the bf16 product ({a.shape[0]} x {a.shape[1]}): not timed",
              file=sys.stderr)
        return None
    return run


def check():
    """Each GEMM of the loop against float64 per expert (the grouped GEMM runs only on a GPU,
    where grouped_call checks it against the per-expert GEMMs before it is timed)."""
    if torch is None:
        print("SKIPPED: the MoE probe's check needs PyTorch")
        return 0
    gen = torch.Generator().manual_seed(0)
    bad = 0
    for spec in GEMMS:
        a, b = operands(3, 5, 8, 6, spec, torch.float32, "cpu", gen)
        want = torch.stack([a[g].double() @ b[g].double() for g in range(3)])
        got = loop_mm(a, b, torch.empty(want.shape, dtype=torch.float32))
        err = (got.double() - want).abs().max().item()
        if not err < 1e-5:
            print(f"FAIL: {spec[1]} (loop): {err:.3g} from the reference")
            bad += 1
    print("moe_probe: the expert GEMMs match the reference" if bad == 0 else f"moe_probe: {bad} GEMM(s) wrong")
    return 1 if bad else 0


def probe(cases, h, f, reps, dtype):
    """{case: [{pass, name, impl, us, flops}]} on the GPU."""
    torch.backends.cuda.matmul.allow_tf32 = False
    gen = torch.Generator().manual_seed(0)
    out = []
    fp8 = dtype == "fp8"
    for groups, r in cases:
        kernels = []
        for spec in GEMMS:
            a, b = operands(groups, r, h, f, spec, torch.bfloat16 if fp8 else dtype, "cuda", gen)
            flops = 2.0 * a.shape[0] * a.shape[1] * a.shape[2] * b.shape[2]
            if fp8:
                scaled = fp8_call(a, b)
                if scaled is None:
                    return []
                runs = {"loop": scaled}
            else:
                c = torch.empty(groups, a.shape[1], b.shape[2], device="cuda", dtype=dtype)
                runs = {"loop": lambda: loop_mm(a, b, c)}
                grouped = grouped_call(a, b) if spec[2] == "R" else None
                if grouped is not None:
                    runs["grouped"] = grouped
            for impl, fn in runs.items():
                kernels.append({"pass": spec[0], "name": spec[1], "impl": impl,
                                "us": block.gpu_median_us(torch, fn, reps), "flops": flops})
        out.append({"groups": groups, "rows": r, "kernels": kernels})
    return out


def explain(sc, device, groups, rows, h, f, dtype, sets):
    """{name: predicted us} of the expert GEMMs of a MoE layer whose `groups` local experts get `rows`
    rows each (one device, top-1 of `groups` experts over a sequence of groups x rows tokens)."""
    heads = next(a for a in (32, 16, 8, 4, 2, 1) if h % a == 0)
    text = ("name: moe-probe\n"
            f"topology: {{device: {device}, nodes: 1, devices_per_node: 1, links: []}}\n"
            f"model: {{transformer: {{layers: 1, hidden: {h}, heads: {heads}, seq: {groups * rows}, vocab: 50304, "
            "dropout: false, attention: flash, bias: false, activation: swiglu, "
            f"moe: {{experts: {groups}, top_k: 1, expert_hidden: {f}}}}}}}\n"
            "pipeline: {schedule: 1f1b, ranks: 1, microbatches: 1, microbatch_size: 1, steps: 1}\n"
            f"training: {{optimizer: adam, lr: 0.0001, "
            f"{'dtype: bf16, fp8: true' if dtype == 'fp8' else f'dtype: {dtype}'}}}\n")
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "moe.yaml")
        with open(path, "w") as fh:
            fh.write(text)
        r = subprocess.run([sc, "simulate", path, "--explain-json", f"{tmp}/explain.json", *sets],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if r.returncode != 0:
            raise common.ToolError(f"simulate --explain-json failed: {(r.stderr.strip().splitlines() or ['?'])[-1]}")
        with open(f"{tmp}/explain.json") as fh:
            explained = json.load(fh)
    section = next((s for s in explained["sections"] if s["id"] == "moe_block"), None)
    if section is None:
        raise common.ToolError("simulate --explain-json listed no MoE block")
    return {k["name"]: k["time_us"] for k in section["kernels"] if k["name"] in {g[1] for g in GEMMS}}


def report(sc, path, out, device, sets):
    """The report of the probe at `path` into folder `out` (its text returned)."""
    run = block.load(path, "probe")
    device = block.device_file(run, device)
    h, f, dtype = run.get("hidden"), run.get("ffn"), run.get("dtype")
    if not isinstance(h, int) or not isinstance(f, int) or dtype not in ("bf16", "fp16", "fp8"):
        raise common.ToolError(f"{path}: expected the probe's hidden, ffn (integers) and dtype (bf16, fp16, fp8)")
    md = [f"# Expert GEMMs against {run['device']} (PyTorch {run.get('torch', '?')}, {dtype}, median of "
          f"{run.get('reps', '?')}), predicted on {device}", "",
          f"A SwiGLU expert of hidden {h} and width {f}; every expert of a case gets the same rows. Per case and "
          "way, the six GEMMs' time (µs, all experts) and rate (TFLOP/s), measured / predicted.", "",
          "| experts x rows | way | F | I | W | TFLOP/s meas / pred | pred / meas |",
          "| --- | --- | --- | --- | --- | --- | --- |"]
    compare = {"device": device, "probe_device": run["device"], "cases": []}
    for case in run["models"]:
        groups, rows = case.get("groups"), case.get("rows")
        kernels = case.get("kernels") or []
        pred = explain(sc, device, groups, rows, h, f, dtype, sets)
        for impl in sorted({k["impl"] for k in kernels}):
            mine = {k["name"]: k for k in kernels if k["impl"] == impl}
            if impl == "loop" and set(mine) != set(pred):
                raise common.ToolError(f"{path}: case {groups}x{rows}: the probe's GEMMs and the list's differ: "
                                       f"{sorted(set(mine) ^ set(pred))}")
            names = sorted(mine)
            meas_us = sum(mine[n]["us"] for n in names)
            pred_us = sum(pred[n] for n in names)
            flops = sum(mine[n]["flops"] for n in names)
            by_pass = " | ".join(
                f"{sum(mine[n]['us'] for n in names if mine[n]['pass'] == p):.0f} / "
                f"{sum(pred[n] for n in names if mine[n]['pass'] == p):.0f}" for p in "FIW")
            md.append(f"| {groups} x {rows} | {impl} | {by_pass} | {flops / meas_us / 1e6:.0f} / "
                      f"{flops / pred_us / 1e6:.0f} | {pred_us / meas_us:.3f} |")
            compare["cases"].append({"groups": groups, "rows": rows, "impl": impl, "measured_us": meas_us,
                                     "predicted_us": pred_us, "flops": flops,
                                     "kernels": [{"name": n, "measured_us": mine[n]["us"], "predicted_us": pred[n]}
                                                 for n in names]})
    text = "\n".join(md) + "\n"
    common.write_text(os.path.join(out, "moe-probe.md"), text)
    common.write_text(os.path.join(out, "moe-probe-compare.json"), json.dumps(compare, indent=1) + "\n")
    return text


def main(argv):
    if argv[:1] == ["report"]:
        return block.report_command(argv[1:], "moe-probe.sh (report)", "the MoE probe's report", report)
    ap = common.ArgumentParser(prog="moe_probe", description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--cases", default=CASES)
    ap.add_argument("--hidden", type=int, default=4096)
    ap.add_argument("--ffn", type=int, default=1536)
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--dtype", choices=("bf16", "fp16", "fp8"), default="bf16")
    ap.add_argument("--out")
    args = ap.parse_args(argv)
    if args.check:
        return check()
    cases = parse_cases(args.cases)
    if args.reps < 1 or args.hidden < 1 or args.ffn < 1:
        raise common.usage_error("--reps, --hidden and --ffn must be positive")
    if skipped := block.missing_gpu(torch, "the MoE probe"):
        print(skipped)
        return 0
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(args.dtype, args.dtype)  # "fp8": probe's own
    models = probe(cases, args.hidden, args.ffn, args.reps, dtype)
    if not models:
        print("SKIPPED: the FP8 GEMMs do not run here (the lines above say why)")
        return 0
    run = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__, "dtype": args.dtype, "reps": args.reps,
           "hidden": args.hidden, "ffn": args.ffn, "models": models}
    text = json.dumps(run, indent=1) + "\n"
    if args.out:
        common.write_text(args.out, text)
    for case in run["models"]:
        for k in case["kernels"]:
            print(f"{case['groups']}x{case['rows']} {k['impl']:7s} {k['pass']} {k['name']:14s} {k['us']:9.1f} us "
                  f"{k['flops'] / k['us'] / 1e6:6.0f} TFLOP/s")
    return 0


if __name__ == "__main__":
    raise SystemExit(common.entry("moe_probe", main))
