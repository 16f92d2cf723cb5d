"""A fused causal attention kernel timed on a GPU with PyTorch at several sequence lengths, beside the
roofline model's prediction of the same kernel (`stagecraft simulate --explain-json`, the block's
`flash_attention` in F and `flash_attention.dX` in I), so that the device file's rate for fused
attention can be measured rather than fitted.

Why: the ModelZoo's long-context Qwen3-235B runs (16K-128K tokens, attention most of the work) are
predicted within 6.4% since fused attention is timed as the GEMM its kernel runs (2026-12-02; at
half that rate before, 17-44% slow), while the rows of a few thousand tokens are predicted fast
(docs/results/moe-published.md). The rate the model gives the kernel (the GEMM model's batched
efficiency, measured on the unfused attention's matmuls) has never been measured on the fused one.

Each case is one microbatch of S tokens and H heads of D (128 by default; b = 1), causal, bf16, through
torch.nn.functional.scaled_dot_product_attention with one backend at a time: "cudnn" (cuDNN's fused
attention, what Transformer Engine runs on Hopper) and "flash" (FlashAttention-2 in PyTorch), where
each runs. F is the forward, I the backward (the gradients of q, k and v). Each is checked against
the math backend's result before it is timed between CUDA events with the queue kept full, the
median of --reps. FLOPs are the model's count: 2·S·(S/2)·2D·H in F, 2·S·(S/2)·5D·H in I (the causal
half of the scores).

Usage (python3 -m stagecraft_tools.attention_probe, tools/ on PYTHONPATH; scripts/attention-probe.sh
runs both):
  attention_probe.py --check        the forward and backward against a float64 reference (CPU, tiny
                                    shapes, the math backend)
  attention_probe.py [--cases 4096x32,...] [--head-dim 128] [--reps N] [--out FILE.json]
                                    time on the GPU; prints "SKIPPED: ..." and exits 0 without
                                    PyTorch or a CUDA device
  attention_probe.py report PROBE.json --out DIR [--device-file NAME] [--set K=V]...
                                    the report (no PyTorch needed; $STAGECRAFT or the build's stagecraft)
"""
import json
import os
import sys

from . import block, common

try:
    import torch
except ImportError:  # the probe is optional: the build and tests never need PyTorch
    torch = None

# SEQxHEADS: from the 4K tokens of most published rows to the long-context table's 16K-32K per
# device (Qwen3-235B's 64 heads over T = 4: 16 a device), about the same work per case.
CASES = "4096x32,8192x16,16384x8,32768x4"
BACKENDS = ("cudnn", "flash")


def parse_cases(text):
    """[(seq, heads)] of "SxH,SxH"; a usage error names a bad one."""
    return block.parse_cases(text, "SEQxHEADS, an even sequence and heads > 0",
                             lambda s, h: s > 1 and h > 0 and s % 2 == 0)


def flops(seq, heads, d):
    """(F, I) FLOPs of one causal case as the model counts them (the causal half of the scores)."""
    half = 2.0 * seq * (seq / 2) * heads
    return half * 2 * d, half * 5 * d


def operands(seq, heads, d, dtype, device, gen):
    """q, k, v as [1, H, S, D] needing their gradients, and the output's gradient."""
    def rand():
        return (torch.randn(1, heads, seq, d, generator=gen, dtype=torch.float64) * 0.5).to(device=device, dtype=dtype)
    q, k, v = (rand().requires_grad_() for _ in range(3))
    return q, k, v, rand()


def attend(q, k, v):
    return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)


def reference(q, k, v, grad):
    """The output and q's, k's and v's gradients in float64, written out (softmax of masked scores)."""
    q64, k64, v64 = (t.detach().double().requires_grad_() for t in (q, k, v))
    scores = q64 @ k64.transpose(-1, -2) / q64.shape[-1] ** 0.5
    n = scores.shape[-1]
    scores = scores.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), float("-inf"))
    out = torch.softmax(scores, dim=-1) @ v64
    return (out, *torch.autograd.grad(out, (q64, k64, v64), grad.double()))


def check():
    """SDPA's causal forward and backward on the CPU against reference(), two tiny cases."""
    if torch is None or not hasattr(torch.nn.functional, "scaled_dot_product_attention"):
        print("SKIPPED: the attention probe's check needs PyTorch 2.0 or later (scaled_dot_product_attention)")
        return 0
    gen = torch.Generator().manual_seed(0)
    bad = 0
    for seq, heads, d in ((8, 2, 4), (6, 1, 8)):
        q, k, v, grad = operands(seq, heads, d, torch.float32, "cpu", gen)
        out = attend(q, k, v)
        got = (out, *torch.autograd.grad(out, (q, k, v), grad))
        for name, g, w in zip(("out", "dq", "dk", "dv"), got, reference(q, k, v, grad)):
            err = (g.double() - w).abs().max().item()
            if not err < 1e-4:
                print(f"FAIL: {seq}x{heads}x{d} {name}: {err:.3g} from the reference")
                bad += 1
    print("attention_probe: the attention matches the reference" if bad == 0 else f"attention_probe: {bad} wrong")
    return 1 if bad else 0


def backend_runs(name, q, k, v, grad):
    """(forward, backward) callables under SDPA backend `name`, or None where it does not run here or
    differs from the math backend."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    backend = {"cudnn": getattr(SDPBackend, "CUDNN_ATTENTION", None), "flash": SDPBackend.FLASH_ATTENTION}[name]
    if backend is None:
        return None
    try:
        with sdpa_kernel(backend):
            out = attend(q, k, v)
            got = torch.autograd.grad(out, (q, k, v), grad, retain_graph=True)
    except RuntimeError as e:
        print(f"attention_probe: {name} does not run here ({str(e).splitlines()[0]})", file=sys.stderr)
        return None
    with sdpa_kernel(SDPBackend.MATH):
        want_out = attend(q, k, v)
        want = torch.autograd.grad(want_out, (q, k, v), grad)
    for g, w in zip((out, *got), (want_out, *want)):
        if not torch.allclose(g.float(), w.float(), rtol=5e-2, atol=5e-2 * w.abs().max().item()):
            print(f"attention_probe: {name} differs from the math backend ({q.shape[2]} tokens): not timed",
                  file=sys.stderr)
            return None

    def forward():
        with sdpa_kernel(backend):
            return attend(q, k, v)

    def backward():
        return torch.autograd.grad(out, (q, k, v), grad, retain_graph=True)
    return forward, backward


def probe(cases, d, reps):
    """[{seq, heads, kernels: [{pass, name, impl, us, flops}]}] on the GPU."""
    gen = torch.Generator().manual_seed(0)
    out = []
    for seq, heads in cases:
        q, k, v, grad = operands(seq, heads, d, torch.bfloat16, "cuda", gen)
        f_flops, i_flops = flops(seq, heads, d)
        kernels = []
        for name in BACKENDS:
            runs = backend_runs(name, q, k, v, grad)
            if runs is None:
                continue
            kernels.append({"pass": "F", "name": "flash_attention", "impl": name, "us": block.gpu_median_us(torch, runs[0], reps),
                            "flops": f_flops})
            kernels.append({"pass": "I", "name": "flash_attention.dX", "impl": name, "us": block.gpu_median_us(torch, runs[1], reps),
                            "flops": i_flops})
        if kernels:
            out.append({"seq": seq, "heads": heads, "kernels": kernels})
    return out


def report(sc, path, out, device, sets):
    """The report of the probe at `path` into folder `out` (its text returned)."""
    run = block.load(path, "probe")
    device = block.device_file(run, device)
    d = run.get("head_dim")
    if not isinstance(d, int) or d < 1:
        raise common.ToolError(f"{path}: expected the probe's head_dim (a positive integer)")
    md = [f"# Fused causal attention against {run['device']} (PyTorch {run.get('torch', '?')}, bf16, median of "
          f"{run.get('reps', '?')}), predicted on {device}", "",
          f"One microbatch of S tokens, H heads of {d}. Per case and backend the forward (F) and backward (I): "
          "time (µs) and rate (TFLOP/s, the causal half of the scores), measured / predicted.", "",
          "| S x H | backend | F µs | I µs | F TFLOP/s | I TFLOP/s | pred / meas (F + I) |",
          "| --- | --- | --- | --- | --- | --- | --- |"]
    compare = {"device": device, "probe_device": run["device"], "cases": []}
    for case in run["models"]:
        seq, heads = case.get("seq"), case.get("heads")
        if not isinstance(seq, int) or not isinstance(heads, int):
            raise common.ToolError(f"{path}: a case without its seq and heads (integers)")
        kernels, _ = block.explain(sc, device, heads * d, heads, seq, 1, "bf16", False,
                                   ["--set", "model.transformer.attention=flash", *sets])
        pred = {name: kernels.get((p, name)) for p, name in (("F", "flash_attention"), ("I", "flash_attention.dX"))}
        if None in pred.values():
            raise common.ToolError("simulate --explain-json listed no flash_attention kernels")
        for impl in sorted({k["impl"] for k in case.get("kernels") or []}):
            mine = {k["name"]: k for k in case["kernels"] if k["impl"] == impl}
            if set(mine) != set(pred):
                raise common.ToolError(f"{path}: case {seq}x{heads} {impl}: expected flash_attention and "
                                       f"flash_attention.dX, got {sorted(mine)}")
            f, i = mine["flash_attention"], mine["flash_attention.dX"]
            rate = lambda k, us: k["flops"] / us / 1e6  # noqa: E731
            total_meas, total_pred = f["us"] + i["us"], pred["flash_attention"] + pred["flash_attention.dX"]
            md.append(f"| {seq} x {heads} | {impl} | {f['us']:.0f} / {pred['flash_attention']:.0f} | "
                      f"{i['us']:.0f} / {pred['flash_attention.dX']:.0f} | "
                      f"{rate(f, f['us']):.0f} / {rate(f, pred['flash_attention']):.0f} | "
                      f"{rate(i, i['us']):.0f} / {rate(i, pred['flash_attention.dX']):.0f} | "
                      f"{total_pred / total_meas:.3f} |")
            compare["cases"].append({"seq": seq, "heads": heads, "impl": impl, "measured_us": total_meas,
                                     "predicted_us": total_pred,
                                     "kernels": [{"name": n, "measured_us": mine[n]["us"], "predicted_us": pred[n],
                                                  "flops": mine[n]["flops"]} for n in sorted(mine)]})
    if not compare["cases"]:
        raise common.ToolError(f"{path}: the probe timed no backend")
    text = "\n".join(md) + "\n"
    common.write_text(os.path.join(out, "attention-probe.md"), text)
    common.write_text(os.path.join(out, "attention-probe-compare.json"), json.dumps(compare, indent=1) + "\n")
    return text


def main(argv):
    if argv[:1] == ["report"]:
        return block.report_command(argv[1:], "attention-probe.sh (report)", "the attention probe's report", report)
    ap = common.ArgumentParser(prog="attention_probe", description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--cases", default=CASES)
    ap.add_argument("--head-dim", type=int, default=128)
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--out")
    args = ap.parse_args(argv)
    if args.check:
        return check()
    cases = parse_cases(args.cases)
    if args.reps < 1 or args.head_dim < 1:
        raise common.usage_error("--reps and --head-dim must be positive")
    if skipped := block.missing_gpu(torch, "the attention probe"):
        print(skipped)
        return 0
    if not hasattr(torch.nn.functional, "scaled_dot_product_attention"):
        print(f"SKIPPED: the attention probe needs PyTorch 2.0 or later (this is {torch.__version__})")
        return 0
    models = probe(cases, args.head_dim, args.reps)
    if not models:
        print("SKIPPED: no fused attention backend runs here (the lines above say why)")
        return 0
    run = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__, "reps": args.reps,
           "head_dim": args.head_dim, "models": models}
    text = json.dumps(run, indent=1) + "\n"
    if args.out:
        common.write_text(args.out, text)
    for case in models:
        for k in case["kernels"]:
            print(f"{case['seq']}x{case['heads']} {k['impl']:6s} {k['pass']} {k['name']:18s} {k['us']:10.1f} us "
                  f"{k['flops'] / k['us'] / 1e6:6.0f} TFLOP/s")
    return 0


if __name__ == "__main__":
    raise SystemExit(common.entry("attention_probe", main))
