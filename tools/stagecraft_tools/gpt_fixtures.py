"""Generate the GPT-2 reference fixtures tests/data/gpt/block.txt and tests/data/gpt/model.txt.

block.txt holds one pre-LayerNorm GPT-2 block (inputs, parameters, output and all gradients of
sum(y * dout)); model.txt holds a small whole model (tokens, targets, parameters, logits, the mean
cross-entropy loss and all parameter gradients). Inputs and parameters are float32 values from a
seeded generator; expected outputs are computed in float64 from them. The C++ test in tests/ reads
these text files without torch and checks its fp32 forward/backward against them.

Regenerate (PyTorch 1.13, Debian's python3-torch; deterministic, same bytes every run):
  scripts/gen-gpt-fixtures.sh [OUTPUT_DIR]     # default OUTPUT_DIR: tests/data/gpt
"""
import math
import os
import pathlib
import sys

from .common import ROOT, ToolError, entry

try:
    import torch
    import torch.nn.functional as F
except ImportError:  # the fixtures are checked in: only regenerating them needs PyTorch
    torch = F = None

EPS = 1e-5
BLOCK_PARAMS = ["ln1.w", "ln1.b", "qkv.w", "qkv.b", "proj.w", "proj.b",
                "ln2.w", "ln2.b", "fc.w", "fc.b", "fcproj.w", "fcproj.b"]


def init_block(g, C):
    """The 12 float32 block parameters, drawn in BLOCK_PARAMS order."""
    def linear(out_dim, in_dim):
        return torch.randn(out_dim, in_dim, generator=g) / math.sqrt(in_dim)

    def uniform(n, a):
        return torch.rand(n, generator=g) * (2 * a) - a

    shapes = {"qkv": (3 * C, C), "proj": (C, C), "fc": (4 * C, C), "fcproj": (C, 4 * C)}
    p = {}
    for name in BLOCK_PARAMS:
        kind, which = name.split(".")
        if kind.startswith("ln"):
            p[name] = 1 + uniform(C, 0.2) if which == "w" else uniform(C, 0.1)
        else:
            out_dim, in_dim = shapes[kind]
            p[name] = linear(out_dim, in_dim) if which == "w" else uniform(out_dim, 0.1)
    return p


def attention(qkv, NH):
    """Causal multi-head attention of qkv [B,T,3C] -> [B,T,C]."""
    B, T, C3 = qkv.shape
    C = C3 // 3
    q, k, v = (t.view(B, T, NH, C // NH).transpose(1, 2) for t in qkv.split(C, dim=-1))
    att = (q @ k.transpose(-2, -1)) / math.sqrt(C // NH)
    mask = torch.ones(T, T, dtype=torch.bool).triu(1)  # key index > query index
    att = F.softmax(att.masked_fill(mask, float("-inf")), dim=-1)
    return (att @ v).transpose(1, 2).reshape(B, T, C)


def attention_loop(qkv, NH):
    """The same attention, one (batch, head, query) at a time, as an independent check."""
    B, T, C3 = qkv.shape
    C = C3 // 3
    hd = C // NH
    out = torch.zeros(B, T, C, dtype=qkv.dtype)
    for b in range(B):
        for h in range(NH):
            cols = slice(h * hd, (h + 1) * hd)
            for t in range(T):
                q = qkv[b, t, 0:C][cols]
                scores = [float(q @ qkv[b, s, C:2 * C][cols]) / math.sqrt(hd) for s in range(t + 1)]
                m = max(scores)
                e = [math.exp(sc - m) for sc in scores]
                for s in range(t + 1):
                    out[b, t, cols] += (e[s] / sum(e)) * qkv[b, s, 2 * C:3 * C][cols]
    return out


def block(x, p, NH, attn=attention):
    C = x.shape[-1]
    h = F.layer_norm(x, (C,), p["ln1.w"], p["ln1.b"], EPS)
    o = attn(h @ p["qkv.w"].T + p["qkv.b"], NH)
    x1 = x + o @ p["proj.w"].T + p["proj.b"]
    h2 = F.layer_norm(x1, (C,), p["ln2.w"], p["ln2.b"], EPS)
    u = F.gelu(h2 @ p["fc.w"].T + p["fc.b"], approximate="tanh")
    return x1 + u @ p["fcproj.w"].T + p["fcproj.b"]


def model(tokens, p, cfg):
    T, C = cfg["T"], cfg["C"]
    x = p["wte"][tokens] + p["wpe"][torch.arange(T)]
    for l in range(cfg["L"]):
        x = block(x, {n: p[f"h.{l}.{n}"] for n in BLOCK_PARAMS}, cfg["NH"])
    x = F.layer_norm(x, (C,), p["lnf.w"], p["lnf.b"], EPS)
    return x @ p["lm_head.w"].T


def leaves(params):
    """float64 copies of float32 tensors, requiring grad."""
    return {n: t.double().requires_grad_() for n, t in params.items()}


def gen_block(cfg):
    B, T, C, NH = cfg["B"], cfg["T"], cfg["C"], cfg["NH"]
    g = torch.Generator().manual_seed(1234)
    x32 = torch.randn(B, T, C, generator=g)
    dout32 = torch.randn(B, T, C, generator=g)
    p32 = init_block(g, C)

    x, p = x32.double().requires_grad_(), leaves(p32)
    y = block(x, p, NH)
    (y * dout32.double()).sum().backward()

    with torch.no_grad():  # hand-written attention vs the per-query loop
        y_loop = block(x, p, NH, attn=attention_loop)
    err = (y - y_loop).abs().max().item()
    check(err <= 1e-12, f"block attention vs loop: max abs diff {err:.3e}")

    gc = init_block(torch.Generator().manual_seed(1), 8)  # gradcheck on a small block
    gx = torch.randn(1, 3, 8, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    names = list(gc)
    ok = torch.autograd.gradcheck(
        lambda xx, *ps: block(xx, dict(zip(names, ps)), 2),
        (gx.requires_grad_(), *[t.double().requires_grad_() for t in gc.values()]))
    check(ok, "block gradcheck (B=1 T=3 C=8 NH=2)")

    inputs = [("x", x32), ("dout", dout32)] + list(p32.items())
    outputs = [("y", y), ("dx", x.grad)] + [(f"grad.{n}", t.grad) for n, t in p.items()]
    return inputs, outputs


def gen_model(cfg):
    B, T, C, V, L = cfg["B"], cfg["T"], cfg["C"], cfg["V"], cfg["L"]
    g = torch.Generator().manual_seed(5678)
    tokens = torch.randint(0, V, (B, T), generator=g)
    targets = torch.randint(0, V, (B, T), generator=g)
    p32 = {"wte": torch.randn(V, C, generator=g) * 0.5, "wpe": torch.randn(T, C, generator=g) * 0.5}
    for l in range(L):
        p32.update({f"h.{l}.{n}": t for n, t in init_block(g, C).items()})
    p32["lnf.w"] = 1 + (torch.rand(C, generator=g) * 0.4 - 0.2)
    p32["lnf.b"] = torch.rand(C, generator=g) * 0.2 - 0.1
    p32["lm_head.w"] = torch.randn(V, C, generator=g) / math.sqrt(C)

    p = leaves(p32)
    logits = model(tokens, p, cfg)
    loss = F.cross_entropy(logits.view(B * T, V), targets.view(B * T))
    loss.backward()

    with torch.no_grad():  # the same values in float32 should meet the 1e-5 target
        loss32 = F.cross_entropy(model(tokens, p32, cfg).view(B * T, V), targets.view(B * T))
    rel = abs(loss32.item() - loss.item()) / abs(loss.item())
    check(rel <= 1e-5, f"model float32 loss {loss32.item():.9f} vs float64 (rel {rel:.2e})")

    inputs = [("tokens", tokens), ("targets", targets)] + list(p32.items())
    outputs = [("loss", loss.detach().reshape(1)), ("logits", logits)]
    outputs += [(f"grad.{n}", t.grad) for n, t in p.items()]
    return inputs, outputs


def check(ok, what):
    if not ok:
        raise ToolError(f"check FAILED: {what}")
    print(f"ok: {what}", file=sys.stderr)


def fmt(v):
    return str(v) if isinstance(v, int) else repr(float(v))


def write(path, what, cfg, tensors):
    lines = ["# Generated by tools/stagecraft_tools/gpt_fixtures.py; do not edit by hand.",
             "# Regenerate: scripts/gen-gpt-fixtures.sh",
             f"# {what}",
             "# Inputs/parameters are float32 values; outputs are float64, computed from them.",
             "# Format: 'config KEY=VALUE ...', then per tensor 'tensor NAME D0 [D1 ...]' and its",
             "# prod(D) values, row-major, 8 per line.",
             "config " + " ".join(f"{k}={v}" for k, v in cfg.items()) + f" eps={EPS!r}"]
    for name, t in tensors:
        t = t.detach()
        lines.append(f"tensor {name} " + " ".join(str(d) for d in t.shape))
        vals = [fmt(v) for v in t.reshape(-1).tolist()]
        lines += [" ".join(vals[i:i + 8]) for i in range(0, len(vals), 8)]
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text("\n".join(lines) + "\n")
    os.replace(tmp, path)
    print(f"wrote {path} ({path.stat().st_size} bytes)", file=sys.stderr)


def main(argv):
    if len(argv) > 1:
        raise ToolError("usage: scripts/gen-gpt-fixtures.sh [OUTPUT_DIR]", status=2)
    if torch is None:
        raise ToolError(f"needs PyTorch ({sys.executable} cannot import torch; apt-get install python3-torch)")
    torch.set_num_threads(1)
    out = pathlib.Path(argv[0]) if argv else ROOT / "tests" / "data" / "gpt"
    out.mkdir(parents=True, exist_ok=True)

    cfg = {"B": 2, "T": 7, "C": 24, "NH": 3}
    inputs, outputs = gen_block(cfg)
    write(out / "block.txt", "One pre-LayerNorm GPT-2 block: x, dout, 12 params; "
          "y, dx and grad.<param> of sum(y * dout).", cfg, inputs + outputs)

    cfg = {"B": 2, "T": 8, "C": 16, "NH": 4, "L": 2, "V": 50}
    inputs, outputs = gen_model(cfg)
    print(f"model loss {outputs[0][1].item()!r}", file=sys.stderr)
    write(out / "model.txt", "Whole GPT-2 model (untied lm_head, no bias): tokens, targets, "
          "params; loss (mean cross-entropy), logits, grad.<param>.", cfg, inputs + outputs)


if __name__ == "__main__":
    raise SystemExit(entry("gen-gpt-fixtures", main))
