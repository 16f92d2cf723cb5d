"""The PyTorch side of scripts/bench-vs-torch.sh (stagecraft_tools.peer_bench runs it as
`python3 -m stagecraft_tools.torch_peer`; PyTorch 1.13, Debian's python3-torch).

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
  gpt_train L C NH T V B M STEPS
                           the whole GPT (embeddings, L blocks, final LayerNorm, untied LM head,
                           mean cross-entropy) on one thread, M microbatches of B sequences
                           accumulated per Adam step; samples/s and ms per step over STEPS
                           steps after one warm-up step.
"""
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


def timed_steps(step, steps):
    """Seconds for `steps` calls of step after one warm-up call."""
    step()
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    return time.perf_counter() - t0


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
    mask = torch.ones(t, t, dtype=torch.bool).triu(1)
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


def gpt_train(n_layers, c, nh, t, vocab, b, m, steps):
    torch.set_num_threads(1)
    gen = torch.Generator().manual_seed(0)
    blocks = [gpt_block_params(c, gen) for _ in range(n_layers)]
    wte = torch.randn(vocab, c, generator=gen) * 0.02
    wpe = torch.randn(t, c, generator=gen) * 0.01
    lnf = (torch.ones(c), torch.zeros(c))
    head = torch.randn(vocab, c, generator=gen) * 0.02
    params = [wte, wpe, *lnf, head] + [z for p in blocks for pair in p.values() for z in pair]
    for z in params:
        z.requires_grad_(True)
    opt = torch.optim.Adam(params, lr=1e-3)
    data = [(torch.randint(vocab, (b, t), generator=gen), torch.randint(vocab, (b, t), generator=gen)) for _ in range(m)]
    pos = torch.arange(t)

    def step():
        opt.zero_grad(set_to_none=False)
        for tokens, targets in data:
            x = wte[tokens] + wpe[pos]
            for p in blocks:
                x = gpt_block(p, x, nh)
            logits = F.linear(F.layer_norm(x, (c,), *lnf, eps=1e-5), head)
            (F.cross_entropy(logits.view(-1, vocab), targets.view(-1)) / m).backward()
        opt.step()

    elapsed = timed_steps(step, steps)
    return {"samples_per_s": steps * m * b / elapsed, "step_ms": 1e3 * elapsed / steps}


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
        result = gpt_train(*map(int, argv[2:10]))
    else:
        raise SystemExit(f"torch_peer: unknown subcommand {what}")
    print(json.dumps(result))


if __name__ == "__main__":
    main(sys.argv)
