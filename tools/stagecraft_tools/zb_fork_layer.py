"""Times the Zero Bubble paper's own transformer stage with its own timers: one GPU, no pipeline.

What the paper's profile (Appendix D; data/zero_bubble_paper.csv) measured is its runtime's
ScheduleTimers around each F, B and W of a middle pipeline stage
(megatron/core/pipeline_parallel/zb_schedules.py in its code release, ed85b11c of
github.com/sail-sg/zero-bubble-pipeline-parallelism; docs/cost-model.md, "What the profile's
timers hold"). This module builds that release's own middle stage (its Megatron-LM fork's
ParallelTransformer, legacy model, no pre- or post-processing, causal self-attention, the layer
count of a middle stage of each model) and runs each pass as its runtime does:

- F: the stage's forward on the received activation, under Megatron's Timer (synchronize, wall
  clock, synchronize);
- B: autograd backward from the output's gradient with the fork's weight-gradient store
  collecting the linear layers' weight GEMMs (its gradient-accumulation fusion), then
  WeightGradStore.flush, as schedule_b does;
- W: WeightGradStore.pop, the deferred weight GEMMs accumulating into main_grad, fp16 as in the
  paper's runs (its script trains in fp16 without --accumulate-allreduce-grads-in-fp32, so
  Megatron-LM's DDP gives each parameter a gradient buffer of its own dtype; --main-grad fp32
  times the fp32 accumulation instead).

Its kernels are the fork's: Apex's scaled upper-triangular masked softmax and fused weight-
gradient GEMMs, built from an Apex source tree (--apex) with nvcc and torch.utils.cpp_extension's
paths (no ninja needed; a later run reuses the libraries); the
bias-GELU and bias-dropout-add are the fork's TorchScript functions, run with PyTorch's
TorchScript fuser on (`--jit fused`) and off (`unfused`), since which one the paper's software had
is not known (Megatron-LM asks for nvFuser, which newer PyTorch no longer has). LayerNorm is
PyTorch's own kernel: Apex's (the fork's MixedFusedLayerNorm) is not built here, and the report
says so. Nothing of the fork or Apex is kept in this repository: both are read from the
directories given.

  --ops MODEL      CPU: the aten operators one layer of MODEL dispatches in F, B and W.
  --check          CPU, float64, a small stage, no Apex: the F / B / W this module drives (the
                   fork's weight-gradient store, a stand-in for Apex's fused weight-gradient GEMM)
                   gives the same input gradient and weight gradients as the fork's stage run
                   with plain autograd (gradient-accumulation fusion off). Needs torch only.
  --rehearse       CPU: the timing loop, report and JSON at a toy shape (no Apex, float64).
  default          CUDA: per model, F, B and W per layer (mean and median over --iters), B/F and
                   W/F beside the paper's profile; --out writes them as JSON.

scripts/zb-fork-layer.sh --prepare makes both trees (the release's megatron/, Apex's csrc/megatron/)
and runs this module on them through scripts/zb_fork_layer.py, under the python3 that imports torch.
The fork's stand-ins, its loading and its stage are zb_fork_load's.
"""


import argparse
import json
import os
import statistics
import sys

from . import tables  # the paper's Table 3 models, stage split and Appendix D profile
from .common import ROOT
from .zb_fork_load import (apex_commit, build_apex, init_process, load_fork, make_stage, passes, stood_in_roots,
                           wgrad_stand_in)

SEQ = tables.ZB_SEQ
MODELS = tables.zb_models()
# The entry point the wrapper runs (and run_variants runs again, once per TorchScript setting):
# a script, so that the interpreter's path starts in scripts/ and not in the working directory.
ENTRY = os.path.join(str(ROOT), "scripts", "zb_fork_layer.py")


def run_check(fork_dir):
    """CPU: the F / B / W split the script drives gives plain autograd's gradients."""
    import torch
    sys.modules["fused_weight_gradient_mlp_cuda"] = wgrad_stand_in()
    fork = load_fork(fork_dir, cpu=True)
    init_process(cpu=True)
    torch.manual_seed(0)
    layers, heads, hidden, micro, seq = 3, 4, 64, 2, 16
    grads = {}
    for fusion in (True, False):
        torch.manual_seed(1)
        stage, _ = make_stage(fork, layers, heads, hidden, micro, seq, cpu=True, dropout=0.0, grad_fusion=fusion,
                              model_layers=4 * layers, main_grad="fp32")
        gen = torch.Generator().manual_seed(2)
        x = torch.randn(seq, micro, hidden, dtype=torch.float64, generator=gen)
        dy = torch.randn(seq, micro, hidden, dtype=torch.float64, generator=gen)
        steps = passes(fork, stage, x, dy)
        for phase in steps:
            if not isinstance(phase, str):
                dx = phase
                break
            if phase == "W":
                stored = fork.WeightGradStore.weight_grad_queue[0].queue[0]
                if fusion and len(stored) != 4 * layers:
                    raise SystemExit(f"FAIL: the store holds {len(stored)} weight GEMMs after B, want 4 per layer "
                                     f"({4 * layers})")
        grads[fusion] = (dx, {n: (p.main_grad if fusion and p.grad is None else p.grad)
                              for n, p in stage.named_parameters()})
    (dx_w, g_w), (dx_r, g_r) = grads[True], grads[False]
    in_b = (dx_w - dx_r).abs().max().item() / dx_r.abs().max().item()  # float64 throughout
    in_w = 0.0  # accumulated into the fp32 main_grad, as the fork's runs do
    names, deferred = sorted(g_r), 0
    for n in names:
        if g_w[n] is None or g_r[n] is None:
            raise SystemExit(f"FAIL: {n} has no gradient")
        diff = (g_w[n].double() - g_r[n]).abs().max().item() / max(g_r[n].abs().max().item(), 1e-300)
        if g_w[n].dtype == torch.float32:
            deferred += 1
            in_w = max(in_w, diff)
        else:
            in_b = max(in_b, diff)
    ok = in_b < 1e-10 and in_w < 1e-5 and deferred == 4 * layers
    print(f"{'ok' if ok else 'FAIL'}: the fork's stage ({layers} layers, hidden {hidden}) with its weight-gradient "
          f"store against plain autograd: the input gradient and {len(names) - deferred} parameters' from B, largest "
          f"relative difference {in_b:.1e} (float64); {deferred} weight gradients from W (want {4 * layers}), "
          f"{in_w:.1e} (fp32 main_grad)")
    if fork.stubbed:
        print("stood in at import: " + ", ".join(stood_in_roots(fork)))
    return 0 if ok else 1


# Operators that only make a view or an empty tensor: no kernel, so --ops leaves them out.
VIEW_OPS = {"view", "_unsafe_view", "t", "transpose", "permute", "expand", "as_strided", "_reshape_alias", "detach",
            "split", "split_with_sizes", "unsqueeze", "squeeze", "alias", "slice", "select", "is_same_size", "empty",
            "empty_like", "lift_fresh"}


def run_ops(fork_dir, model):
    """CPU: the aten operators the fork's stage dispatches in each of F, B and W (one layer of
    `model`'s widths, seq 64, fp32, dropout 0.1), as PyTorch's dispatcher sees them (composite
    operators broken into the ones that run), views left out, with their tensors' shapes: which
    tensors each pass reads and writes, to set against the roofline list's kernels. The CPU runs
    the fused softmax and the TorchScript functions unfused (no CUDA kernels, no GPU fuser)."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_flatten
    sys.modules["fused_weight_gradient_mlp_cuda"] = wgrad_stand_in()
    fork = load_fork(fork_dir, cpu=True)
    init_process(cpu=True)
    _, total_layers, heads, hidden, micro, _ = MODELS[model]
    seq = 64
    stage, _ = make_stage(fork, 1, heads, hidden, micro, seq, cpu=True, dropout=0.1, grad_fusion=True,
                          model_layers=total_layers, main_grad="fp32")
    stage = stage.float()
    x, dy = torch.randn(seq, micro, hidden), torch.randn(seq, micro, hidden)
    for _ in range(3):  # TorchScript's profiling runs first
        for _ in passes(fork, stage, x, dy):
            pass

    class Recorder(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.ops = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            tensors, _ = tree_flatten((args, kwargs or {}))
            self.ops.append((str(func.overloadpacket).split(".")[-1],
                             [list(t.shape) for t in tensors if isinstance(t, torch.Tensor)]))
            return func(*args, **(kwargs or {}))

    steps = passes(fork, stage, x, dy)
    phase = next(steps)
    while isinstance(phase, str):
        recorder = Recorder()
        with recorder:
            following = next(steps)
        print(f"{phase}: the aten operators dispatched, views left out (tensor shapes; s {seq}, b {micro}, "
              f"h {hidden}, {heads} heads)")
        for name, shapes in recorder.ops:
            if name not in VIEW_OPS:
                print(f"  aten::{name:28s} {shapes}")
        phase = following
    return 0


def run_variants(opts):
    """--jit both: each TorchScript setting in a process of its own (a scripted function keeps the
    plan its first runs made), the Apex build shared; the two JSON files merged."""
    import subprocess
    os.makedirs(opts.build_dir, exist_ok=True)
    merged = None
    for jit in ("fused", "unfused"):
        out = f"{opts.out or os.path.join(opts.build_dir, 'zb-fork-layer')}.{jit}.json"
        cmd = [sys.executable, ENTRY, "--fork", opts.fork, "--apex", opts.apex or "",
               "--build-dir", opts.build_dir, "--models", opts.models, "--jit", jit,
               "--iters", str(opts.iters), "--warmup", str(opts.warmup), "--out", out, "--main-grad", opts.main_grad]
        cmd += ["--rehearse"] if opts.rehearse else []
        if subprocess.run(cmd).returncode != 0:
            print(f"zb_fork_layer.py: the --jit {jit} run failed", file=sys.stderr)
            return 1
        with open(out) as fh:
            part = json.load(fh)
        os.remove(out)
        if merged is None:
            merged = part
        else:
            merged["models"].update(part["models"])
    if opts.out:
        write_json(opts.out, merged)
    return 0


def write_json(path, value):
    tmp = path + ".tmp"
    with open(tmp, "w") as fh:
        json.dump(value, fh, indent=1)
    os.replace(tmp, path)


def stage_entry(times, prof, **fields):
    """One model's entry of the run's JSON: `fields` as given (layers, heads, hidden, microbatch, seq,
    jit, fuser, main_grad, softmax_fused, iters), then from `times` (each pass's times of the whole
    stage, ms: {"F": [...], "B": [...], "W": [...]}) the mean and median per layer and B/F and W/F
    of the means, and B/F and W/F of the paper's profile `prof` (its f, b and w)."""
    layers = fields["layers"]
    per_layer = {k: [t / layers for t in v] for k, v in times.items()}
    mean = {k: statistics.mean(v) for k, v in per_layer.items()}
    med = {k: statistics.median(v) for k, v in per_layer.items()}
    return dict(fields, mean_ms=mean, median_ms=med, b_over_f=mean["B"] / mean["F"], w_over_f=mean["W"] / mean["F"],
                paper_b_over_f=prof["b"] / prof["f"], paper_w_over_f=prof["w"] / prof["f"])


def stage_line(name, entry):
    """The line a run prints for model `name`'s entry (stage_entry's)."""
    mean = entry["mean_ms"]
    return (f"{name:>6} {entry['jit']:>8}  F {mean['F']:.3f}  B {mean['B']:.3f}  W {mean['W']:.3f} ms per layer  "
            f"B/F {entry['b_over_f']:.3f} (paper {entry['paper_b_over_f']:.3f})  "
            f"W/F {entry['w_over_f']:.3f} (paper {entry['paper_w_over_f']:.3f})  "
            f"softmax {'Apex fused' if entry['softmax_fused'] else 'unfused'}")


def run_timing(opts):
    """Each model's middle stage, F / B / W timed with the fork's Timer. On the GPU, the real
    thing; with --rehearse, the same loop on the CPU at a toy shape (float64, no Apex), so the
    loop, the report and the JSON are tested where there is no GPU."""
    import torch
    cpu = opts.rehearse
    if not cpu and not torch.cuda.is_available():
        print("zb_fork_layer.py: no CUDA device (--check and --rehearse run on the CPU)", file=sys.stderr)
        return 2
    profile = tables.zb_profile()
    # The extensions first, then the fork, whose layers look for them once, at import.
    if cpu:
        sys.modules["fused_weight_gradient_mlp_cuda"] = wgrad_stand_in()
        built = []
    else:
        built = build_apex(opts.apex, opts.build_dir)
    fork = load_fork(opts.fork, cpu=cpu)
    init_process(cpu=cpu)
    stood_in = stood_in_roots(fork)
    print(f"{'CPU rehearsal' if cpu else torch.cuda.get_device_name()}, PyTorch {torch.__version__}; built: "
          f"{', '.join(built) or 'nothing'}; stood in at import: {', '.join(stood_in)}", flush=True)
    if hasattr(torch._C, "_jit_set_texpr_fuser_enabled"):
        torch._C._jit_set_texpr_fuser_enabled(opts.jit == "fused")
        jit_note = f"TorchScript's fuser (NNC) {'on' if opts.jit == 'fused' else 'off'}"
    else:
        jit_note = "TorchScript's fuser cannot be set in this PyTorch: its default"
    device, dtype = ("cpu", torch.float64) if cpu else ("cuda", torch.float16)
    result = dict(device="CPU rehearsal (toy shape)" if cpu else torch.cuda.get_device_name(),
                  torch=torch.__version__, built=built, apex_commit=apex_commit(opts.apex) if opts.apex else None,
                  layer_norm="PyTorch's layer_norm (Apex's MixedFusedLayerNorm not built)",
                  stood_in=stood_in, models={})
    for name in opts.models.split(","):
        _, total_layers, heads, hidden, micro, _ = MODELS[name]
        seq = SEQ
        layers = tables.middle_layers(MODELS[name])  # the end stages hold one layer fewer (§5.1)
        if cpu:
            heads, hidden, micro, seq = 4, 64, 1, 32
        torch.manual_seed(0)
        stage, _ = make_stage(fork, layers, heads, hidden, micro, seq, cpu=cpu, dropout=0.0 if cpu else 0.1,
                              grad_fusion=True, model_layers=total_layers, main_grad=opts.main_grad)
        softmax = stage.layers[0].self_attention.core_attention.scale_mask_softmax
        softmax_fused = bool(softmax.scaled_masked_softmax_fusion and
                             softmax.is_kernel_available(None, micro, heads, seq, seq))
        x = torch.randn(seq, micro, hidden, dtype=dtype, device=device)
        dy = torch.randn_like(x) * 1e-2
        times = {"F": [], "B": [], "W": []}
        for it in range(opts.warmup + opts.iters):
            timer, phase = None, None
            for phase_or_grad in passes(fork, stage, x, dy):
                if timer is not None:
                    timer.stop()
                    if it >= opts.warmup:
                        times[phase].append(timer.elapsed(reset=True) * 1e3)
                if not isinstance(phase_or_grad, str):
                    break
                phase = phase_or_grad
                timer = fork.Timer(phase)
                timer.start()
        entry = stage_entry(times, profile[name], layers=layers, heads=heads, hidden=hidden, microbatch=micro, seq=seq,
                            jit=opts.jit, fuser=jit_note, main_grad=opts.main_grad, softmax_fused=softmax_fused,
                            iters=opts.iters)
        result["models"][f"{name}/{opts.jit}"] = entry
        print(stage_line(name, entry), flush=True)
        del stage
        if not cpu:
            torch.cuda.empty_cache()
    if opts.out:
        write_json(opts.out, result)
    return 0


def main(argv=None):
    """The command (argv: sys.argv[1:] unless given); returns its exit status."""
    # The paper's script sets it (before CUDA starts, where it takes effect); the fork's checks ask for it.
    os.environ["CUDA_DEVICE_MAX_CONNECTIONS"] = "1"
    ap = argparse.ArgumentParser(prog="zb_fork_layer.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--fork", required=True, help="a directory holding the Zero Bubble release's megatron/")
    ap.add_argument("--apex", help="an Apex source tree (csrc/megatron/); without it the fork's fused softmax "
                                   "and weight-gradient GEMM are missing and the run stops")
    ap.add_argument("--build-dir", default=os.path.join(str(ROOT), "build", "zb-fork-ext"))
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--rehearse", action="store_true", help="the timing loop on the CPU at a toy shape, no Apex")
    ap.add_argument("--ops", metavar="MODEL", help="CPU: the aten operators of one layer's F, B and W")
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--jit", choices=("fused", "unfused", "both"), default="both")
    ap.add_argument("--main-grad", choices=("fp16", "fp32"), default="fp16",
                    help="the weight-gradient buffer's dtype (the paper's fp16 runs: fp16)")
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--out")
    opts = ap.parse_args(argv)
    if not os.path.isfile(os.path.join(opts.fork, "megatron", "core", "weight_grad_store.py")):
        print(f"zb_fork_layer.py: --fork {opts.fork}: no megatron/core/weight_grad_store.py (the Zero Bubble "
              "release's tree, e.g. `git archive ed85b11c megatron`)", file=sys.stderr)
        return 2
    for m in opts.models.split(","):
        if m not in MODELS:
            print(f"zb_fork_layer.py: --models: unknown model '{m}' (known: {', '.join(MODELS)})", file=sys.stderr)
            return 2
    if opts.check:
        return run_check(opts.fork)
    if opts.ops:
        if opts.ops not in MODELS:
            print(f"zb_fork_layer.py: --ops: unknown model '{opts.ops}' (known: {', '.join(MODELS)})", file=sys.stderr)
            return 2
        return run_ops(opts.fork, opts.ops)
    if not opts.rehearse and (not opts.apex or not os.path.isdir(os.path.join(opts.apex, "csrc", "megatron"))):
        print("zb_fork_layer.py: --apex DIR: an Apex source tree with csrc/megatron/ is needed on the GPU",
              file=sys.stderr)
        return 2
    return run_variants(opts) if opts.jit == "both" else run_timing(opts)


if __name__ == "__main__":
    sys.exit(main())
