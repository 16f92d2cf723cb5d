"""One transformer block's kernels, timed one by one on a GPU with PyTorch, named as the roofline
model names them (`stagecraft simulate --explain`), with its backward split as the executor and
the Zero Bubble runtime split it: F, I (input gradients) and W (weight gradients).

Why: issue 30's point 6 asks the roofline model for the Zero Bubble paper's profiled
T_F : T_B : T_W (Appendix D, A100s). The model's attention backward costs more than its forward,
where the profile shows F - W = B - W (docs/cost-model.md). This probe measures, on the GPU at
hand, each kernel of the list at the paper's four model shapes, so the list's kernels can be
checked one by one against a device, and the pass ratios of a physical implementation set beside
the paper's.

The block is Megatron-LM's GPT layer without FlashAttention, as the paper ran it (pre-LayerNorm,
QKV, scaled causal softmax, attention dropout, context, projection, bias-dropout-add, LayerNorm,
4h MLP with bias-GELU (tanh), bias-dropout-add), written as explicit forward and backward calls
so that every kernel of the list is one timed call; its gradients are checked against PyTorch's
autograd (--check). Each kernel is timed between CUDA events with the queue kept full (a sleep
kernel first, so the host's launches never show), the median of --reps; each pass is also timed
whole, as Megatron-LM's Timer does (torch.cuda.synchronize() before and after, wall clock), so
host launch time shows there.

Attribution: "ours" is the list's (bias and LayerNorm parameter gradients in W); "zb" is the
paper's runtime (its WeightGradStore defers the four weight GEMMs alone: the rest is in B).

--fused times the kernels the list takes as fused and PyTorch runs as two or three (the
scale-mask-softmax, bias + GELU, the bias-dropout-adds) as one kernel each, made by torch.compile
(PyTorch 2), as Megatron-LM's fused kernels run them.

Usage (python3 -m stagecraft_tools.layer_probe, with tools/ on PYTHONPATH; scripts/layer-probe.sh runs it):
  layer_probe.py --check                  gradients against autograd (CPU, float64, tiny shapes)
  layer_probe.py [--models 1.5B,6.2B,14.6B,28.3B] [--reps N] [--dtype fp16|bf16] [--dropout P]
                 [--fused] [--out FILE.json]   time on the GPU (needs CUDA)
Prints "SKIPPED: ..." and exits 0 when PyTorch or a CUDA device is missing (timing mode).
"""
import argparse
import json
import math
import os
import statistics
import sys
import time

from . import tables  # the paper's models and profile, one place (no torch needed)
from .block import ZB_IN_B  # the list's W kernels the paper's runtime runs in B

try:
    import torch
except ImportError:  # the probe is optional: the build and tests never need PyTorch
    torch = None

# The Zero Bubble paper's Table 3 models ({name: Model(layers, heads, hidden, microbatch, gpus)}, seq SEQ).
MODELS = tables.zb_models()
SEQ = tables.ZB_SEQ
LN_EPS = 1e-5


class Clock:
    """Times named calls: between CUDA events ("cuda"), by the host's clock ("wall": a smoke run
    on the CPU), or not at all (None)."""

    def __init__(self, mode):
        self.mode = mode
        self.cuda = mode == "cuda"
        self.marks = []  # (pass, name, start, end)

    def run(self, pass_, name, fn):
        if self.mode is None:
            return fn()
        if self.mode == "wall":
            t0 = time.perf_counter()
            out = fn()
            self.marks.append((pass_, name, t0, time.perf_counter()))
            return out
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        out = fn()
        end.record()
        self.marks.append((pass_, name, start, end))
        return out

    def take(self):
        if self.cuda:
            torch.cuda.synchronize()
            out = [(p, n, s.elapsed_time(e) * 1e3) for p, n, s, e in self.marks]
        else:
            out = [(p, n, (e - s) * 1e6) for p, n, s, e in self.marks]
        self.marks = []
        return out


def make_params(h, dtype, device, gen):
    def w(*shape):
        return (torch.randn(*shape, generator=gen, dtype=torch.float64) * 0.02).to(device=device, dtype=dtype)

    def ones_ish(n):
        return (1 + 0.1 * torch.randn(n, generator=gen, dtype=torch.float64)).to(device=device, dtype=dtype)

    return {"g1": ones_ish(h), "be1": w(h), "wqkv": w(3 * h, h), "bqkv": w(3 * h), "wo": w(h, h), "bo": w(h),
            "g2": ones_ish(h), "be2": w(h), "w1": w(4 * h, h), "b1": w(4 * h), "w2": w(h, 4 * h), "b2": w(h)}


def masked_softmax(scores, causal):
    return torch.softmax(scores.masked_fill(causal, float("-inf")), dim=-1)


def bias_gelu_of(f1, bias):
    pre = f1 + bias
    return pre, torch.nn.functional.gelu(pre, approximate="tanh")


def bias_dropout_add(t, bias, resid, p):
    out, mask = torch.native_dropout(t + bias, p, True)
    return out + resid, mask


def compiled(fn):
    """fn compiled whole (one graph, which Inductor makes one kernel of here); where that fails,
    said on stderr and compiled in parts."""
    whole, parts = torch.compile(fn, fullgraph=True, dynamic=False), None

    def call(*args):
        nonlocal parts
        if parts is None:
            try:
                return whole(*args)
            except Exception as e:  # noqa: BLE001 - any compile failure: say it, and go on in parts
                print(f"layer_probe: {fn.__name__} did not compile whole ({type(e).__name__}: {str(e)[:200]}); "
                      "timed as compiled in parts", file=sys.stderr)
                parts = torch.compile(fn, dynamic=False)
        return parts(*args)
    return call


# The three kernels the list takes as fused, as PyTorch runs them eagerly: two or three kernels each.
EAGER_KERNELS = {"softmax": masked_softmax, "bias_gelu": bias_gelu_of, "bias_dropout_add": bias_dropout_add}


def fused_kernels():
    """The three fused kernels, compiled: one kernel each."""
    return {name: compiled(fn) for name, fn in EAGER_KERNELS.items()}


def forward(x, P, b, s, a, p, clock, causal, fused=None):
    """x: [b*s, h]. Returns the output and what the backward needs; `fused`: fused_kernels()
    (else the three run eagerly)."""
    kernels = fused or EAGER_KERNELS
    T, h = x.shape
    d = h // a
    scale = 1.0 / math.sqrt(d)
    keep = 1.0 - p
    c = clock.run
    y1, mu1, rs1 = c("F", "ln1", lambda: torch.native_layer_norm(x, [h], P["g1"], P["be1"], LN_EPS))
    qkv = c("F", "qkv", lambda: torch.mm(y1, P["wqkv"].t()))
    qkv = c("F", "qkv.bias", lambda: qkv.add_(P["bqkv"]))

    def split():
        v5 = qkv.view(b, s, a, 3, d)
        return [v5[:, :, :, i].permute(0, 2, 1, 3).reshape(b * a, s, d) for i in range(3)]

    q, k, v = c("F", "split_heads", split)
    # Megatron-LM's form: baddbmm into a buffer with beta 0, the scale folded into alpha.
    scores = c("F", "scores", lambda: torch.baddbmm(q.new_empty(b * a, s, s), q, k.transpose(1, 2), beta=0.0, alpha=scale))
    probs = c("F", "softmax", lambda: kernels["softmax"](scores, causal))
    dropped, amask = c("F", "attention_dropout", lambda: torch.native_dropout(probs, p, True))
    ctx = c("F", "context", lambda: torch.bmm(dropped, v))
    cm = c("F", "merge_heads", lambda: ctx.view(b, a, s, d).permute(0, 2, 1, 3).reshape(T, h))
    po = c("F", "proj", lambda: torch.mm(cm, P["wo"].t()))

    x2, m1 = c("F", "bias_dropout_add1", lambda: kernels["bias_dropout_add"](po, P["bo"], x, p))
    y2, mu2, rs2 = c("F", "ln2", lambda: torch.native_layer_norm(x2, [h], P["g2"], P["be2"], LN_EPS))
    f1 = c("F", "fc", lambda: torch.mm(y2, P["w1"].t()))

    # The input to the GELU is kept for its backward, as Megatron-LM's bias_gelu keeps it.
    pre, act = c("F", "bias_gelu", lambda: kernels["bias_gelu"](f1, P["b1"]))
    f2 = c("F", "fc2", lambda: torch.mm(act, P["w2"].t()))
    out, m2 = c("F", "bias_dropout_add2", lambda: kernels["bias_dropout_add"](f2, P["b2"], x2, p))
    saved = dict(x=x, y1=y1, mu1=mu1, rs1=rs1, q=q, k=k, v=v, probs=probs, dropped=dropped, amask=amask, cm=cm,
                 x2=x2, m1=m1, y2=y2, mu2=mu2, rs2=rs2, pre=pre, act=act, m2=m2, b=b, s=s, a=a, scale=scale, keep=keep)
    return out, saved


def backward_input(dout, S, P, clock):
    """I: every input gradient; returns dx and what W needs."""
    c = clock.run
    b, s, a, scale, keep = S["b"], S["s"], S["a"], S["scale"], S["keep"]
    T, h = S["x"].shape
    d = h // a
    dz2 = c("I", "bias_dropout_add2.dX", lambda: torch.ops.aten.native_dropout_backward(dout, S["m2"], 1.0 / keep))
    dact = c("I", "fc2.dX", lambda: torch.mm(dz2, P["w2"]))
    dpre = c("I", "bias_gelu.dX", lambda: torch.ops.aten.gelu_backward(dact, S["pre"], approximate="tanh"))
    dy2 = c("I", "fc.dX", lambda: torch.mm(dpre, P["w1"]))
    dx2 = c("I", "ln2.dX", lambda: torch.ops.aten.native_layer_norm_backward(
        dy2, S["x2"], [h], S["mu2"], S["rs2"], P["g2"], P["be2"], [True, False, False])[0].add_(dout))
    dpo = c("I", "bias_dropout_add1.dX", lambda: torch.ops.aten.native_dropout_backward(dx2, S["m1"], 1.0 / keep))
    dcm = c("I", "proj.dX", lambda: torch.mm(dpo, P["wo"]))
    dctx = c("I", "merge_heads.dX", lambda: dcm.view(b, s, a, d).permute(0, 2, 1, 3).reshape(b * a, s, d))
    ddropped = c("I", "context.dP", lambda: torch.bmm(dctx, S["v"].transpose(1, 2)))
    dv = c("I", "context.dV", lambda: torch.bmm(S["dropped"].transpose(1, 2), dctx))
    dprobs = c("I", "attention_dropout.dX", lambda: torch.ops.aten.native_dropout_backward(ddropped, S["amask"], 1.0 / keep))
    dscores = c("I", "softmax.dX", lambda: torch._softmax_backward_data(dprobs, S["probs"], -1, dprobs.dtype))
    dq = c("I", "scores.dQ", lambda: torch.bmm(dscores, S["k"]).mul_(scale))
    dk = c("I", "scores.dK", lambda: torch.bmm(dscores.transpose(1, 2), S["q"]).mul_(scale))

    def merge():
        return torch.stack([t.view(b, a, s, d).permute(0, 2, 1, 3) for t in (dq, dk, dv)], dim=3).reshape(T, 3 * h)

    dqkv = c("I", "split_heads.dX", merge)
    dy1 = c("I", "qkv.dX", lambda: torch.mm(dqkv, P["wqkv"]))
    dx = c("I", "ln1.dX", lambda: torch.ops.aten.native_layer_norm_backward(
        dy1, S["x"], [h], S["mu1"], S["rs1"], P["g1"], P["be1"], [True, False, False])[0].add_(dx2))
    return dx, dict(dz2=dz2, dpre=dpre, dy2=dy2, dpo=dpo, dqkv=dqkv, dy1=dy1)


def backward_weight(S, G, P, clock):
    """W: every parameter gradient, named as the list names them."""
    c = clock.run
    h = S["x"].shape[1]
    grads = {}

    def linear(name, weight, bias, dout, inp):  # a linear layer's weight GEMM and bias column sums
        grads[weight] = c("W", name + ".dW", lambda: torch.mm(dout.t(), inp))
        grads[bias] = c("W", name + ".db", lambda: dout.sum(0))

    def layer_norm(name, gamma, beta, dy, x, mu, rs):  # a LayerNorm's two parameters, one kernel
        _, grads[gamma], grads[beta] = c("W", name + ".dgamma", lambda: torch.ops.aten.native_layer_norm_backward(
            dy, x, [h], mu, rs, P[gamma], P[beta], [False, True, True]))

    linear("fc2", "w2", "b2", G["dz2"], S["act"])
    linear("fc", "w1", "b1", G["dpre"], S["y2"])
    layer_norm("ln2", "g2", "be2", G["dy2"], S["x2"], S["mu2"], S["rs2"])
    linear("proj", "wo", "bo", G["dpo"], S["cm"])
    linear("qkv", "wqkv", "bqkv", G["dqkv"], S["y1"])
    layer_norm("ln1", "g1", "be1", G["dy1"], S["x"], S["mu1"], S["rs1"])
    return grads


def reference(x, P, S, p):
    """The same block through autograd, with the forward's own dropout masks (the oracle)."""
    b, s, a, scale, keep = S["b"], S["s"], S["a"], S["scale"], S["keep"]
    T, h = x.shape
    d = h // a
    F = torch.nn.functional
    y1 = F.layer_norm(x, [h], P["g1"], P["be1"], LN_EPS)
    qkv = (y1 @ P["wqkv"].t() + P["bqkv"]).view(b, s, a, 3, d)
    q, k, v = [qkv[:, :, :, i].permute(0, 2, 1, 3).reshape(b * a, s, d) for i in range(3)]
    causal = torch.triu(torch.ones(s, s, dtype=torch.bool), 1)
    probs = torch.softmax((q @ k.transpose(1, 2) * scale).masked_fill(causal, float("-inf")), -1)
    ctx = (probs * S["amask"] / keep) @ v
    cm = ctx.view(b, a, s, d).permute(0, 2, 1, 3).reshape(T, h)
    x2 = x + (cm @ P["wo"].t() + P["bo"]) * S["m1"] / keep
    y2 = F.layer_norm(x2, [h], P["g2"], P["be2"], LN_EPS)
    act = F.gelu(y2 @ P["w1"].t() + P["b1"], approximate="tanh")
    return x2 + (act @ P["w2"].t() + P["b2"]) * S["m2"] / keep


def check():
    """Manual F, I and W against autograd on small shapes, float64 on the CPU."""
    if torch is None:
        print("SKIPPED: --check needs PyTorch (python3-torch)")
        return 0
    worst = 0.0
    # The eager kernels are the fused ones' functions, uncompiled: one check covers both.
    for b, s, a, h, p in ((2, 8, 2, 16, 0.1), (1, 16, 4, 32, 0.3), (3, 4, 1, 8, 0.0)):
        gen = torch.Generator().manual_seed(b * 100 + s)
        P = make_params(h, torch.float64, "cpu", gen)
        x = torch.randn(b * s, h, generator=gen, dtype=torch.float64)
        causal = torch.triu(torch.ones(s, s, dtype=torch.bool), 1)
        clock = Clock(None)
        out, S = forward(x.clone(), P, b, s, a, p, clock, causal)
        dout = torch.randn(b * s, h, generator=gen, dtype=torch.float64)
        dx, G = backward_input(dout.clone(), S, P, clock)
        grads = backward_weight(S, G, P, clock)
        xr = x.clone().requires_grad_(True)
        Pr = {n: t.clone().requires_grad_(True) for n, t in P.items()}
        outr = reference(xr, Pr, S, p)
        outr.backward(dout)
        pairs = [("output", out, outr.detach()), ("dx", dx, xr.grad)] + [(n, grads[n], Pr[n].grad) for n in P]
        for name, got, want in pairs:
            err = (got - want).abs().max().item() / max(want.abs().max().item(), 1e-30)
            worst = max(worst, err)
            if err > 1e-10:
                print(f"check: b={b} s={s} heads={a} h={h} dropout={p}: {name} differs from autograd by {err:.3e}")
                return 1
    print(f"check: output, input and every parameter gradient match autograd (largest relative error {worst:.1e})")
    return 0


def probe(name, dtype, p, reps, device="cuda", shape=None, fused=None):
    _, layers, a, h, b, _ = MODELS[name] if shape is None else (None, 1, *shape, None)
    s = SEQ if shape is None else 2 * a
    dev = torch.device(device)
    cuda = dev.type == "cuda"

    def sync():
        if cuda:
            torch.cuda.synchronize()

    gen = torch.Generator().manual_seed(1)
    P = make_params(h, dtype, dev, gen)
    x = (torch.randn(b * s, h, generator=gen, dtype=torch.float64)).to(device=dev, dtype=dtype)
    dout = (torch.randn(b * s, h, generator=gen, dtype=torch.float64) * 1e-3).to(device=dev, dtype=dtype)
    causal = torch.triu(torch.ones(s, s, dtype=torch.bool, device=dev), 1)
    per_kernel = {}
    whole = {"F": [], "I": [], "W": []}
    clock = Clock("cuda" if cuda else "wall")
    idle = Clock(None)  # the same calls, untimed one by one
    for rep in range(reps + 3):
        # Kernels one by one, the queue kept full so that the host's launches do not show.
        if cuda:
            torch.cuda._sleep(50_000_000)
        out, S = forward(x, P, b, s, a, p, clock, causal, fused)
        dx, G = backward_input(dout, S, P, clock)
        backward_weight(S, G, P, clock)
        marks = clock.take()
        if rep >= 3:
            for pass_, kname, us in marks:
                per_kernel.setdefault((pass_, kname), []).append(us)
        del out, S, dx, G
        # Each pass whole, as Megatron-LM's Timer times it: synchronize, wall clock, synchronize.
        sync()
        t0 = time.perf_counter()
        out, S = forward(x, P, b, s, a, p, idle, causal, fused)
        sync()
        t1 = time.perf_counter()
        dx, G = backward_input(dout, S, P, idle)
        sync()
        t2 = time.perf_counter()
        backward_weight(S, G, P, idle)
        sync()
        t3 = time.perf_counter()
        if rep >= 3:
            whole["F"].append((t1 - t0) * 1e6)
            whole["I"].append((t2 - t1) * 1e6)
            whole["W"].append((t3 - t2) * 1e6)
        del out, S, dx, G
    kernels = [{"pass": pk[0], "name": pk[1], "us": statistics.median(v)} for pk, v in per_kernel.items()]
    sums = {q: sum(k["us"] for k in kernels if k["pass"] == q) for q in ("F", "I", "W")}
    moved = sum(k["us"] for k in kernels if k["name"] in ZB_IN_B)
    return {"model": name, "layers": layers, "heads": a, "hidden": h, "seq": s, "microbatch": b,
            "kernels": kernels,
            "ours_us": sums,
            "zb_us": {"F": sums["F"], "B": sums["I"] + moved, "W": sums["W"] - moved},
            "timer_us": {q: statistics.median(v) for q, v in whole.items()},
            "timer_spread_us": {q: [min(v), max(v)] for q, v in whole.items()}}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--dtype", choices=("fp16", "bf16"), default="fp16")
    ap.add_argument("--dropout", type=float, default=0.1)
    ap.add_argument("--out")
    ap.add_argument("--device", choices=("cuda", "cpu"), default="cuda",
                    help="cpu: a smoke run of the timing path (host clock, float32), with --shape")
    ap.add_argument("--shape", help="microbatch,heads,hidden in place of the models' (seq 2 x heads)")
    ap.add_argument("--fused", action="store_true", help="the list's fused kernels as one kernel each (torch.compile)")
    args = ap.parse_args()
    if args.check:
        return check()
    if torch is None:
        print("SKIPPED: the layer probe needs PyTorch")
        return 0
    if args.device == "cuda" and not torch.cuda.is_available():
        print("SKIPPED: the layer probe needs a CUDA device (torch.cuda.is_available() is false)")
        return 0
    shape = None
    if args.shape:
        try:
            shape = tuple(int(v) for v in args.shape.split(","))
            assert len(shape) == 3 and min(shape) > 0 and shape[2] % shape[1] == 0
        except (ValueError, AssertionError):
            print(f"layer_probe: --shape '{args.shape}': expected microbatch,heads,hidden (hidden a multiple of heads)",
                  file=sys.stderr)
            return 2
    names = [m for m in args.models.split(",") if m]
    for m in names:
        if m not in MODELS:
            print(f"layer_probe: --models: '{m}' is not one of {', '.join(MODELS)}", file=sys.stderr)
            return 2
    if args.reps < 1 or not 0 <= args.dropout < 1:
        print("layer_probe: --reps must be >= 1 and --dropout in [0, 1)", file=sys.stderr)
        return 2
    fused = None
    if args.fused:
        if not hasattr(torch, "compile"):
            print(f"layer_probe: --fused needs torch.compile (PyTorch 2; this is {torch.__version__})", file=sys.stderr)
            return 2
        fused = fused_kernels()
    dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}[args.dtype] if args.device == "cuda" else torch.float32
    result = {"device": torch.cuda.get_device_name() if args.device == "cuda" else "cpu", "torch": torch.__version__,
              "dtype": args.dtype if args.device == "cuda" else "fp32",
              "dropout": args.dropout, "reps": args.reps, "fused": bool(fused), "models": []}
    for m in names:
        r = probe(m, dtype, args.dropout, args.reps, args.device, shape, fused)
        result["models"].append(r)
        o, z, t = r["ours_us"], r["zb_us"], r["timer_us"]
        print(f"{m:>6} kernels: F {o['F'] / 1e3:.3f} I {o['I'] / 1e3:.3f} W {o['W'] / 1e3:.3f} ms per layer; "
              f"the paper's split B/F {z['B'] / z['F']:.3f} W/F {z['W'] / z['F']:.3f}; "
              f"timed whole F {t['F'] / 1e3:.3f} I {t['I'] / 1e3:.3f} W {t['W'] / 1e3:.3f} ms", flush=True)
    if args.out:
        tmp = args.out + ".tmp"
        with open(tmp, "w") as fh:
            json.dump(result, fh, indent=1)
        os.replace(tmp, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
