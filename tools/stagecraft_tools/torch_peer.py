"""The PyTorch side of scripts/bench-vs-torch.sh (stagecraft_tools.peer_bench runs it as
`python3 -m stagecraft_tools.torch_peer`; PyTorch 1.13, Debian's python3-torch) and, through
gpt_train on CUDA, of scripts/bench-gpu.sh (stagecraft_tools.gpu_peer_bench, with the GPU
machine's PyTorch 2).

Subcommands, each printing one JSON object on stdout:
  layers H ROWS ACT        per-layer F, I and W of 8 x Linear(H, H) + bias -> ACT on [ROWS x H],
                           one thread, written as the same math stagecraft runs and timed in the
                           same order as `stagecraft profile` (median microseconds):
                           F = addmm + activation, I = activation backward + dz @ W,
                           W = dz^T @ x + column sum of dz.
  train H LAYERS ROWS M STEPS ACT THREADS
                           no pipeline: the whole MLP on one process, M microbatches of ROWS
                           accumulated per Adam step, MSE loss; samples/s over STEPS steps after
                           one warm-up step.
  gpipe H LAYERS ROWS M STEPS ACT
                           GPipe over two gloo processes on this machine (loopback only), one
                           thread each, half the layers per process; samples/s.
  gpt_block C NH T B       one GPT-2 block (pre-LayerNorm, causal attention, tanh-GELU MLP) on
                           B sequences of T tokens, one thread: median microseconds of its
                           forward and of its whole backward (input and weight gradients).
  gpt_train L C NH T V B M STEPS [--device cpu|cuda] [--mode eager|compiled]
            [--dtype fp32|tf32|bf16] [--warmup N]
                           the whole GPT (embeddings, L blocks, final LayerNorm, untied LM head,
                           mean cross-entropy), M microbatches of B sequences accumulated per
                           Adam step; samples/s and ms per step over STEPS steps after N
                           warm-up steps (default 1). cpu (default): one thread. cuda: fp32
                           parameters, TF32 matmuls for tf32, bf16 autocast for bf16, fused Adam,
                           the device synchronised before each clock read. compiled: the model
                           through torch.compile (its first step compiles: a warm-up step); where
                           torch.compile is absent (PyTorch < 2.0) or fails, the JSON says
                           {"available": false, "reason": ...} instead of a measurement.
  info                     this interpreter's PyTorch: version, whether it has torch.compile,
                           whether it sees a CUDA device and its name.
"""
import argparse
import contextlib
import json
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn.functional as F


def activation(name):
    if name == "relu":
        return torch.relu
    return lambda z: F.gelu(z, approximate="tanh")


def activation_backward(name, dout, z):
    if name == "relu":
        return torch.ops.aten.threshold_backward(dout, z, 0.0)
    return torch.ops.aten.gelu_backward(dout, z, approximate="tanh")


def median_us(fn, reps=200, warmup=20):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e6


def clocked(step, calls, sync=lambda: None):
    """Seconds for `calls` calls of step; sync() waits for the device before each clock read."""
    sync()
    t0 = time.perf_counter()
    for _ in range(calls):
        step()
    sync()
    return time.perf_counter() - t0


def timed_steps(step, steps):
    """Seconds for `steps` calls of step after one warm-up call."""
    step()
    return clocked(step, steps)


def layers(h, rows, act_name, n_layers=8, rounds=60, warmup=10):
    """As `stagecraft profile` times them: every layer in pipeline order (forwards up, input
    gradients down, then weight gradients), so other layers' data passes through the caches
    between two ops of one layer; the median over layers and rounds of each op."""
    torch.set_num_threads(1)
    torch.manual_seed(0)
    act = activation(act_name)
    ws = [(torch.rand(h, h) * 2 - 1) / h**0.5 for _ in range(n_layers)]
    bs = [torch.zeros(h) for _ in range(n_layers)]
    gws = [torch.zeros(h, h) for _ in range(n_layers)]
    gbs = [torch.zeros(h) for _ in range(n_layers)]
    x0 = torch.rand(rows, h) * 2 - 1
    times = {"forward_us": [], "backward_input_us": [], "backward_weight_us": []}

    def timed(key, measured, fn):
        t0 = time.perf_counter()
        out = fn()
        if measured:
            times[key].append((time.perf_counter() - t0) * 1e6)
        return out

    with torch.no_grad():
        for r in range(warmup + rounds):
            measured = r >= warmup
            x, inputs, zs, dzs = x0, [], [], [None] * n_layers
            for l in range(n_layers):
                inputs.append(x)
                def forward():
                    z = torch.addmm(bs[l], x, ws[l].t())
                    return z, act(z)
                z, x = timed("forward_us", measured, forward)
                zs.append(z)
            dout = x
            for l in reversed(range(n_layers)):
                def backward_input():
                    dz = activation_backward(act_name, dout, zs[l])
                    return dz, torch.mm(dz, ws[l])
                dzs[l], dout = timed("backward_input_us", measured, backward_input)
            for l in range(n_layers):
                def backward_weight():
                    gws[l].addmm_(dzs[l].t(), inputs[l])
                    gbs[l].add_(dzs[l].sum(0))
                timed("backward_weight_us", measured, backward_weight)
    return {key: statistics.median(v) for key, v in times.items()}


def mlp(h, n_layers, act_name):
    torch.manual_seed(1)
    mods = []
    for _ in range(n_layers):
        mods += [torch.nn.Linear(h, h), torch.nn.ReLU() if act_name == "relu" else torch.nn.GELU(approximate="tanh")]
    return torch.nn.Sequential(*mods)


def train(h, n_layers, rows, m, steps, act_name, threads):
    torch.set_num_threads(threads)
    model = mlp(h, n_layers, act_name)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    data = [(torch.rand(rows, h) * 2 - 1, torch.rand(rows, h) * 2 - 1) for _ in range(m)]

    def step():
        opt.zero_grad(set_to_none=False)
        for x, y in data:
            (F.mse_loss(model(x), y) / m).backward()
        opt.step()

    elapsed = timed_steps(step, steps)
    return {"samples_per_s": steps * m * rows / elapsed, "threads": threads}


def gpipe_rank(rank, h, n_layers, rows, m, steps, act_name, port, out):
    torch.set_num_threads(1)
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=2)
    full = mlp(h, n_layers, act_name)
    half = len(full) // 2
    stage = torch.nn.Sequential(*list(full.children())[:half] if rank == 0 else list(full.children())[half:])
    opt = torch.optim.Adam(stage.parameters(), lr=1e-3)
    data = [(torch.rand(rows, h) * 2 - 1, torch.rand(rows, h) * 2 - 1) for _ in range(m)]

    def step():
        opt.zero_grad(set_to_none=False)
        outs, ins = [], []
        for k in range(m):  # all forwards
            if rank == 0:
                y = stage(data[k][0])
                dist.send(y.detach(), 1)
                outs.append(y)
            else:
                x = torch.empty(rows, h)
                dist.recv(x, 0)
                x.requires_grad_(True)
                ins.append(x)
                outs.append(F.mse_loss(stage(x), data[k][1]) / m)
        for k in reversed(range(m)):  # then all backwards
            if rank == 0:
                g = torch.empty(rows, h)
                dist.recv(g, 1)
                outs[k].backward(g)
            else:
                outs[k].backward()
                dist.send(ins[k].grad, 0)
        opt.step()

    step()
    dist.barrier()
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    dist.barrier()
    elapsed = time.perf_counter() - t0
    if rank == 0:
        out.put(steps * m * rows / elapsed)
    dist.destroy_process_group()


def gpipe(h, n_layers, rows, m, steps, act_name):
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    port = 29500 + os.getpid() % 1000
    procs = [ctx.Process(target=gpipe_rank, args=(r, h, n_layers, rows, m, steps, act_name, port, out)) for r in (0, 1)]
    for p in procs:
        p.start()
    samples = out.get(timeout=600)
    for p in procs:
        p.join(timeout=60)
    return {"samples_per_s": samples}


def gpt_block_params(c, gen):
    def linear(out_f, in_f):
        return torch.randn(out_f, in_f, generator=gen) * 0.02, torch.zeros(out_f)
    p = {"ln1": (torch.ones(c), torch.zeros(c)), "qkv": linear(3 * c, c), "proj": linear(c, c),
         "ln2": (torch.ones(c), torch.zeros(c)), "fc": linear(4 * c, c), "fcproj": linear(c, 4 * c)}
    return p


def gpt_block(p, x, nh):
    """The block stagecraft's GptStage runs (exec/gpt.h), in plain torch ops."""
    b, t, c = x.shape
    hd = c // nh
    h = F.layer_norm(x, (c,), *p["ln1"], eps=1e-5)
    q, k, v = F.linear(h, *p["qkv"]).split(c, dim=-1)
    q, k, v = (z.view(b, t, nh, hd).transpose(1, 2) for z in (q, k, v))
    att = (q @ k.transpose(-2, -1)) * (1.0 / hd**0.5)
    mask = torch.ones(t, t, dtype=torch.bool, device=x.device).triu(1)
    att = torch.softmax(att.masked_fill(mask, float("-inf")), dim=-1)
    o = (att @ v).transpose(1, 2).reshape(b, t, c)
    x = x + F.linear(o, *p["proj"])
    u = F.gelu(F.linear(F.layer_norm(x, (c,), *p["ln2"], eps=1e-5), *p["fc"]), approximate="tanh")
    return x + F.linear(u, *p["fcproj"])


def gpt_block_times(c, nh, t, b):
    torch.set_num_threads(1)
    gen = torch.Generator().manual_seed(0)
    p = gpt_block_params(c, gen)
    for tensors in p.values():
        for z in tensors:
            z.requires_grad_(True)
    x = torch.randn(b, t, c, generator=gen, requires_grad=True)
    dout = torch.randn(b, t, c, generator=gen)

    def forward():
        with torch.no_grad():
            gpt_block(p, x, nh)

    def backward():
        y = gpt_block(p, x, nh)
        y.backward(dout)

    f = median_us(forward, reps=60, warmup=5)
    fb = median_us(backward, reps=60, warmup=5)
    return {"forward_us": f, "backward_us": fb - f}


class Gpt(torch.nn.Module):
    """The whole GPT of gpt_train as a module (what torch.compile takes): each block the
    functional gpt_block above on its registered parameters; forward gives the mean
    cross-entropy of one microbatch."""

    def __init__(self, blocks, wte, wpe, lnf, head, nh):
        super().__init__()
        self.nh, self.names = nh, list(blocks[0])
        self.wte, self.wpe, self.head = (torch.nn.Parameter(z) for z in (wte, wpe, head))
        self.lnf = torch.nn.ParameterList(lnf)
        self.blocks = torch.nn.ModuleList()
        for p in blocks:
            block = torch.nn.Module()
            for name, (weight, bias) in p.items():
                block.register_parameter(f"{name}_w", torch.nn.Parameter(weight))
                block.register_parameter(f"{name}_b", torch.nn.Parameter(bias))
            self.blocks.append(block)

    def forward(self, tokens, targets):
        c, t = self.wte.shape[1], tokens.shape[1]
        x = self.wte[tokens] + self.wpe[torch.arange(t, device=tokens.device)]
        for block in self.blocks:
            p = {name: (getattr(block, f"{name}_w"), getattr(block, f"{name}_b")) for name in self.names}
            x = gpt_block(p, x, self.nh)
        logits = F.linear(F.layer_norm(x, (c,), self.lnf[0], self.lnf[1], eps=1e-5), self.head)
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.view(-1))


def gpt_model(n_layers, c, nh, t, vocab, gen, device):
    """A GPT of L blocks initialised from `gen` (in the order the CPU comparison always drew
    them: the blocks, then wte, wpe, the final LayerNorm, the head), its tensors on `device`."""
    blocks = [gpt_block_params(c, gen) for _ in range(n_layers)]
    wte = torch.randn(vocab, c, generator=gen) * 0.02
    wpe = torch.randn(t, c, generator=gen) * 0.01
    lnf = (torch.ones(c), torch.zeros(c))
    head = torch.randn(vocab, c, generator=gen) * 0.02
    on = lambda z: z.to(device)  # noqa: E731 - moved before the module wraps them: no copies
    blocks = [{name: tuple(map(on, pair)) for name, pair in p.items()} for p in blocks]
    return Gpt(blocks, on(wte), on(wpe), tuple(map(on, lnf)), on(head), nh)


def precision(device, dtype):
    """Sets the matmul precision of a run in `dtype` and returns its autocast context (a
    factory): fp32 plain, tf32 fp32 tensors with TF32 matmuls (CUDA's flags; a CPU has no
    TF32), bf16 fp32 parameters under bf16 autocast."""
    if device == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = dtype == "tf32"
        torch.backends.cudnn.allow_tf32 = dtype == "tf32"
    if dtype == "bf16":
        return lambda: torch.autocast(device_type=device, dtype=torch.bfloat16)
    return contextlib.nullcontext


def not_available(mode, reason):
    return {"available": False, "mode": mode, "reason": reason, "torch": torch.__version__}


def first_line(e):
    """An exception as one line: its type and its message's first line."""
    return f"{type(e).__name__}: {(str(e).strip().splitlines() or [''])[0][:300]}"


def gpt_train(n_layers, c, nh, t, vocab, b, m, steps, device="cpu", mode="eager", dtype="fp32", warmup=1):
    """Trains the GPT for `warmup` steps, then times `steps` more: samples/s and ms per step."""
    if mode == "compiled" and not hasattr(torch, "compile"):
        return not_available(mode, f"torch.compile is not in PyTorch {torch.__version__} (it came with 2.0)")
    if device == "cuda" and not torch.cuda.is_available():
        raise SystemExit(f"torch_peer: PyTorch {torch.__version__} sees no CUDA device")
    if device == "cpu":
        torch.set_num_threads(1)
    gen = torch.Generator().manual_seed(0)
    model = gpt_model(n_layers, c, nh, t, vocab, gen, device)
    # Fused Adam on CUDA: one kernel for every parameter, as the fastest PyTorch trainers step.
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, **({"fused": True} if device == "cuda" else {}))
    data = [(torch.randint(vocab, (b, t), generator=gen).to(device), torch.randint(vocab, (b, t), generator=gen).to(device))
            for _ in range(m)]
    forward = torch.compile(model) if mode == "compiled" else model
    autocast = precision(device, dtype)
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)

    def step():
        opt.zero_grad(set_to_none=False)
        for tokens, targets in data:
            with autocast():
                loss = forward(tokens, targets) / m
            loss.backward()
        opt.step()

    try:
        warmup_s = clocked(step, warmup, sync)
    except Exception as e:  # noqa: BLE001 - whatever torch.compile raises: reported, not a crash
        if mode != "compiled":
            raise
        return not_available(mode, f"the compiled model failed in its first step ({first_line(e)})")
    elapsed = clocked(step, steps, sync)
    return {"available": True, "mode": mode, "device": device, "dtype": dtype, "torch": torch.__version__,
            "gpu": torch.cuda.get_device_name() if device == "cuda" else None, "warmup_steps": warmup,
            "warmup_s": warmup_s, "steps": steps, "samples_per_s": steps * m * b / elapsed, "step_ms": 1e3 * elapsed / steps}


def gpt_train_main(argv):
    """gpt_train's command line: the shape, then its options."""
    ap = argparse.ArgumentParser(prog="torch_peer gpt_train")
    ap.add_argument("shape", nargs=8, type=int, metavar=("L", "C", "NH", "T", "V", "B", "M", "STEPS"))
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    ap.add_argument("--mode", choices=("eager", "compiled"), default="eager")
    ap.add_argument("--dtype", choices=("fp32", "tf32", "bf16"), default="fp32")
    ap.add_argument("--warmup", type=int, default=1, help="untimed steps first (compiled: at least 1, the compile)")
    args = ap.parse_args(argv)
    if args.warmup < (1 if args.mode == "compiled" else 0):
        ap.error(f"--warmup {args.warmup}: the compiled model's first step compiles it: at least 1")
    return gpt_train(*args.shape, device=args.device, mode=args.mode, dtype=args.dtype, warmup=args.warmup)


def info():
    """This interpreter's PyTorch, as gpu_peer_bench chooses one by it."""
    cuda = torch.cuda.is_available()
    return {"torch": torch.__version__, "compile": hasattr(torch, "compile"), "cuda": cuda,
            "gpu": torch.cuda.get_device_name() if cuda else None}


def main(argv):
    what = argv[1]
    if what == "layers":
        result = layers(int(argv[2]), int(argv[3]), argv[4])
    elif what == "train":
        result = train(*map(int, argv[2:7]), argv[7], int(argv[8]))
    elif what == "gpipe":
        result = gpipe(*map(int, argv[2:7]), argv[7])
    elif what == "gpt_block":
        result = gpt_block_times(*map(int, argv[2:6]))
    elif what == "gpt_train":
        result = gpt_train_main(argv[2:])
    elif what == "info":
        result = info()
    else:
        raise SystemExit(f"torch_peer: unknown subcommand {what}")
    print(json.dumps(result))


if __name__ == "__main__":
    main(sys.argv)
