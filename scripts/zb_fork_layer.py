#!/usr/bin/env python3
"""Times the Zero Bubble paper's own transformer stage with its own timers: one GPU, no pipeline.

What the paper's profile (Appendix D; data/zero_bubble_paper.csv) measured is its runtime's
ScheduleTimers around each F, B and W of a middle pipeline stage
(megatron/core/pipeline_parallel/zb_schedules.py in its code release, ed85b11c of
github.com/sail-sg/zero-bubble-pipeline-parallelism; docs/cost-model.md, "What the profile's
timers hold"). This script builds that release's own middle stage (its Megatron-LM fork's
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
  --check          CPU, float64, a small stage, no Apex: the F / B / W the script drives (the
                   fork's weight-gradient store, a stand-in for Apex's fused weight-gradient GEMM)
                   gives the same input gradient and weight gradients as the fork's stage run
                   with plain autograd (gradient-accumulation fusion off). Needs torch only.
  --rehearse       CPU: the timing loop, report and JSON at a toy shape (no Apex, float64).
  default          CUDA: per model, F, B and W per layer (mean and median over --iters), B/F and
                   W/F beside the paper's profile; --out writes them as JSON.

scripts/zb-fork-layer.sh --prepare makes both trees (the release's megatron/, Apex's csrc/megatron/)
and runs this script on them.
"""

import argparse
import contextlib
import importlib.abc
import importlib.machinery
import io
import json
import os
import statistics
import sys
import time
import types

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))
from stagecraft_tools import tables  # noqa: E402  the paper's Table 3 models, stage split and Appendix D profile

SEQ = tables.ZB_SEQ
MODELS = tables.zb_models()

# Modules the fork imports at load time that the layer never calls: data, tokenizers, Retro's
# tools, Transformer Engine, Apex's optimizers. Where one is missing, an empty stand-in takes its
# place (any use of it raises); a module that is installed is used as it is.
OPTIONAL_ROOTS = {"regex", "tools", "transformer_engine", "einops", "flash_attn", "sentencepiece", "tiktoken",
                  "nltk", "wandb", "amp_C", "apex", "pybind11", "numpy"}


class _StubMeta(type):
    def __getattr__(cls, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _stub_class(f"{cls.__qualname__}.{name}")


def _stub_class(full):
    def _init(self, *args, **kwargs):
        raise RuntimeError(f"{full} is not installed (zb_fork_layer.py stands in for it at import only)")
    return _StubMeta(full.rsplit(".", 1)[-1], (object,), {"__init__": _init, "__qualname__": full})


class _StubModule(types.ModuleType):
    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _stub_class(f"{self.__name__}.{name}")


class _StubFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def __init__(self):
        self.stubbed = []

    def find_spec(self, name, path, target=None):
        if name.split(".")[0] not in OPTIONAL_ROOTS:
            return None
        # Every real finder has missed `name` (this one runs last). One miss is not the fork's: a
        # real package's `from package import X` while the package is still loading, which
        # Python tries as the submodule package.X and which the package expects to fail (regex
        # does it). Let that fail; stand in for the rest (a package not installed, or installed
        # without the submodule the fork names).
        parent = sys.modules.get(name.rpartition(".")[0]) if "." in name else None
        if parent is not None and not isinstance(parent, _StubModule) and \
                getattr(getattr(parent, "__spec__", None), "_initializing", False):
            return None
        return importlib.machinery.ModuleSpec(name, self, is_package=True)

    def create_module(self, spec):
        module = _StubModule(spec.name)
        module.__path__ = []
        self.stubbed.append(spec.name)
        return module

    def exec_module(self, module):
        pass


def pkg_resources_packaging():
    """The fork imports `from pkg_resources import packaging` at load time (its Transformer Engine
    layers, which the stage never builds); setuptools 70 and later no longer provide that name,
    and Python 3.12 may lack setuptools. Give pkg_resources the real `packaging` where it is
    missing (an empty stand-in where `packaging` is missing too)."""
    try:
        from pkg_resources import packaging  # noqa: F401
        return False
    except Exception:  # ImportError, or setuptools' own failures on import
        pass
    try:
        import packaging
        import packaging.version  # noqa: F401
    except ImportError:
        packaging = _StubModule("packaging")
    module = sys.modules.get("pkg_resources")
    if not isinstance(module, types.ModuleType):
        module = types.ModuleType("pkg_resources")
        sys.modules["pkg_resources"] = module
    module.packaging = packaging
    return True


def wgrad_stand_in():
    """Apex's fused_weight_gradient_mlp_cuda for --check: main_grad += grad_output^T input."""
    module = types.ModuleType("fused_weight_gradient_mlp_cuda")

    def accumulate(total_input, grad_output, main_grad):
        main_grad.add_(grad_output.t().matmul(total_input).to(main_grad.dtype))
    module.wgrad_gemm_accum_fp32 = accumulate
    module.wgrad_gemm_accum_fp16 = accumulate
    return module


APEX_EXTENSIONS = (
    ("scaled_upper_triang_masked_softmax_cuda", ("megatron/scaled_upper_triang_masked_softmax.cpp",
                                                 "megatron/scaled_upper_triang_masked_softmax_cuda.cu")),
    ("fused_weight_gradient_mlp_cuda", ("megatron/fused_weight_gradient_dense.cpp",
                                        "megatron/fused_weight_gradient_dense_cuda.cu",
                                        "megatron/fused_weight_gradient_dense_16bit_prec_cuda.cu")))


def extension_commands(name, sources, csrc, where, capability):
    """The compile commands (source, object, argv) and the link argv of one Apex extension, built
    as torch.utils.cpp_extension would (its include and library paths, the ABI flag) with nvcc and
    the C++ compiler called directly: no ninja needed, every source compiled at once."""
    import sysconfig
    import torch
    from torch.utils import cpp_extension

    def paths(fn):
        try:
            return fn(device_type="cuda")
        except TypeError:  # PyTorch before 2.6
            return fn(cuda=True)
    nvcc = os.path.join(cpp_extension.CUDA_HOME or "/usr/local/cuda", "bin", "nvcc")
    cxx = os.environ.get("CXX", "c++")
    includes = [f"-I{i}" for i in [*paths(cpp_extension.include_paths), sysconfig.get_paths()["include"], csrc]]
    defines = [f"-DTORCH_EXTENSION_NAME={name}", "-DTORCH_API_INCLUDE_EXTENSION_H",
               f"-D_GLIBCXX_USE_CXX11_ABI={int(torch._C._GLIBCXX_USE_CXX11_ABI)}"]
    major, minor = capability
    torch_version = tuple(int(x) for x in torch.__version__.split("+")[0].split(".")[:2])
    std = "-std=c++20" if torch_version >= (2, 13) else "-std=c++17"  # newer PyTorch headers ask for C++20
    compiles = []
    for source in sources:
        src = os.path.join(csrc, source)
        obj = os.path.join(where, os.path.basename(source) + ".o")
        if source.endswith(".cu"):
            # PyTorch's own flags for its extensions, then Apex's setup.py's for these kernels.
            argv = [nvcc, "-c", src, "-o", obj, std, "-O3", "-Xcompiler", "-fPIC", *cpp_extension.COMMON_NVCC_FLAGS,
                    "-U__CUDA_NO_HALF_OPERATORS__", "-U__CUDA_NO_HALF_CONVERSIONS__", "--expt-relaxed-constexpr",
                    "--expt-extended-lambda", "--use_fast_math",
                    f"-gencode=arch=compute_{major}{minor},code=sm_{major}{minor}"]
        else:
            argv = [cxx, "-c", src, "-o", obj, std, "-O3", "-fPIC"]
        compiles.append((src, obj, argv + includes + defines))
    libs = paths(cpp_extension.library_paths)
    so = os.path.join(where, name + ".so")
    link = ([cxx, "-shared", *[obj for _, obj, _ in compiles]] + [f"-L{d}" for d in libs] +
            [f"-Wl,-rpath,{d}" for d in libs] +
            ["-lc10", "-lc10_cuda", "-ltorch", "-ltorch_cpu", "-ltorch_cuda", "-ltorch_python", "-lcudart"])
    # (cuBLAS, which the weight-gradient GEMM calls, comes with libtorch_cuda, as in Apex's own build.)
    return compiles, link, so  # link: add -o OUTPUT


def apex_commit(apex):
    try:
        with open(os.path.join(apex, "COMMIT")) as fh:  # scripts/zb-fork-layer.sh --prepare writes it
            return fh.read().strip() or "unknown"
    except OSError:
        return "unknown"


def build_apex(apex, build_dir):
    """Builds (once: a later run reuses the library) and imports the two Apex extensions the fork's
    middle stage calls, under the names the fork imports; returns what was built and in how long."""
    import importlib.util
    import subprocess
    import torch
    csrc = os.path.join(apex, "csrc")
    built = []
    commit = apex_commit(apex)
    for name, sources in APEX_EXTENSIONS:
        # One build per PyTorch and Apex: a library built against others is never reused.
        where = os.path.join(build_dir, f"{name}-torch{torch.__version__}-apex{commit[:12]}")
        os.makedirs(where, exist_ok=True)
        compiles, link, so = extension_commands(name, sources, csrc, where, torch.cuda.get_device_capability())
        started = time.time()
        if not os.path.isfile(so):
            running = [(src, subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
                       for src, _, argv in compiles]
            for src, proc in running:
                log = proc.communicate()[0]
                if proc.returncode != 0:
                    raise SystemExit(f"zb_fork_layer.py: building {name}: {src} failed:\n{log[-3000:]}")
            result = subprocess.run(link + ["-o", so + ".tmp"], capture_output=True, text=True)
            if result.returncode != 0:
                raise SystemExit(f"zb_fork_layer.py: linking {name} failed:\n{result.stderr[-3000:]}")
            os.replace(so + ".tmp", so)
            built.append(f"{name} (built in {time.time() - started:.0f} s)")
        else:
            built.append(f"{name} (built before)")
        spec = importlib.util.spec_from_file_location(name, so)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        sys.modules[name] = module
    return built


def batch_per_block(sq, sk, b, np_):
    """Apex's scaled_masked_softmax get_batch_per_block (scaled_masked_softmax.h), which the fork
    calls to decide whether its fused softmax applies; host arithmetic only, so not built."""
    log2 = (sk - 1).bit_length()
    next_pow2 = 1 << log2
    warp = min(next_pow2, 32)
    batches_per_warp = 2 if next_pow2 <= 128 else 1
    return (128 // warp) * batches_per_warp


class TorchLayerNorm:
    """Stands in for the fork's MixedFusedLayerNorm (Apex) with PyTorch's layer_norm kernel."""

    def __new__(cls, normalized_shape, eps=1e-5, no_persist_layer_norm=True, sequence_parallel=False,
                apply_layernorm_1p=False):
        import torch
        norm = torch.nn.LayerNorm(normalized_shape, eps=eps)
        for p in norm.parameters():
            setattr(p, "sequence_parallel", sequence_parallel)
        return norm


def load_fork(fork, cpu):
    """Imports the fork's ParallelTransformer with the stand-ins above; returns the modules used."""
    import torch
    finder = _StubFinder()
    sys.meta_path.append(finder)  # after every real finder: only what is not installed
    sys.path.insert(0, fork)
    pkg_resources_packaging()
    amp = torch.cuda.amp
    if not hasattr(amp, "custom_fwd"):  # PyTorch releases after the fork's moved them to torch.amp
        amp.custom_fwd = lambda fwd=None, **kw: torch.amp.custom_fwd(fwd, device_type="cuda", **kw)
        amp.custom_bwd = lambda bwd: torch.amp.custom_bwd(bwd, device_type="cuda")
    if "fused_weight_gradient_mlp_cuda" not in sys.modules:
        raise SystemExit("zb_fork_layer.py: the weight-gradient extension must be in place before the fork is "
                         "imported (its layers look for it once, at import)")
    import megatron.model.utils as mutils
    import megatron.model.transformer as transformer
    import megatron.model.fused_softmax as fused_softmax
    from megatron.core import parallel_state
    from megatron.core.weight_grad_store import WeightGradStore
    from megatron.timers import Timer
    from megatron.core.tensor_parallel import layers as tp_layers
    sys.meta_path.remove(finder)  # the stand-ins served the fork's imports; nothing later gets one
    if "numpy" in finder.stubbed:  # PyTorch imports numpy where it can: let it find none
        del sys.modules["numpy"]
    if not tp_layers._grad_accum_fusion_available:
        raise SystemExit("zb_fork_layer.py: the fork's layers did not find fused_weight_gradient_mlp_cuda")
    mutils.LayerNorm = TorchLayerNorm
    if cpu:
        # --check runs on the CPU: the fork's two device-only calls on the stage's path (its global
        # buffer for the attention scores, the CUDA RNG fork around attention dropout) moved there.
        from megatron.core import utils as core_utils
        from megatron.core.tensor_parallel import random as tp_random

        def cpu_buffer(self, tensor_shape, dtype, name):
            return torch.empty(tuple(tensor_shape), dtype=dtype)
        core_utils.GlobalMemoryBuffer.get_tensor = cpu_buffer
        tp_random.CudaRNGStatesTracker.fork = lambda self, name=None: contextlib.nullcontext()
        if not torch.cuda.is_available():
            torch.cuda.synchronize = lambda device=None: None  # the fork's Timer waits for the GPU
    fused_softmax.FusedScaleMaskSoftmax.get_batch_per_block = staticmethod(batch_per_block)
    return types.SimpleNamespace(transformer=transformer, parallel_state=parallel_state,
                                 WeightGradStore=WeightGradStore, Timer=Timer, stubbed=finder.stubbed)


def stood_in_roots(fork):
    """The top-level modules the fork's import got stand-ins for, sorted."""
    return sorted({name.split(".")[0] for name in fork.stubbed})


def init_process(cpu):
    import torch
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", str(29500 + os.getpid() % 1000))
    os.environ["RANK"], os.environ["WORLD_SIZE"], os.environ["LOCAL_RANK"] = "0", "1", "0"
    if not torch.distributed.is_initialized():
        torch.distributed.init_process_group("gloo", rank=0, world_size=1)  # one rank: nothing is sent


def make_stage(fork, layers, heads, hidden, micro, seq, cpu, dropout, grad_fusion, model_layers,
               main_grad="fp16"):
    """The fork's middle stage of `layers` layers of a `model_layers`-layer model: args parsed by its
    own parser, its ParallelTransformer."""
    import torch
    from megatron import arguments, global_vars
    argv = ["zb_fork_layer", "--num-layers", str(layers), "--hidden-size", str(hidden),
            "--num-attention-heads", str(heads), "--seq-length", str(seq), "--max-position-embeddings", str(seq),
            "--micro-batch-size", str(micro), "--global-batch-size", str(micro),
            "--tensor-model-parallel-size", "1", "--pipeline-model-parallel-size", "1",
            "--attention-dropout", str(dropout), "--hidden-dropout", str(dropout)]
    if cpu:
        argv += ["--use-cpu-initialization", "--no-masked-softmax-fusion"]
    else:
        argv += ["--fp16"]
    if not grad_fusion:
        argv += ["--no-gradient-accumulation-fusion"]
    saved = sys.argv
    sys.argv = argv
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            args = arguments.parse_args()
            arguments.validate_args(args, {})
    finally:
        sys.argv = saved
    global_vars._GLOBAL_ARGS = None
    global_vars._GLOBAL_NUM_MICROBATCHES_CALCULATOR = None
    global_vars.set_args(args)
    with contextlib.redirect_stdout(io.StringIO()):
        global_vars._build_num_microbatches_calculator(args)
    args.num_layers = model_layers  # the whole model's, as in the paper's runs: the config's init scale reads it
    config = arguments.core_transformer_config_from_args(args)
    # The fork's ParallelTransformer gives the first and the last stage one layer fewer (§5.1); with
    # no pipeline its one stage is both, so it is asked for two more than the stage holds.
    args.num_layers = args.encoder_num_layers = layers + 2
    if cpu:
        config.params_dtype = torch.float64
    fork.parallel_state.destroy_model_parallel()
    fork.parallel_state.initialize_model_parallel(1, 1)
    if not cpu:
        from megatron.core import tensor_parallel
        tensor_parallel.model_parallel_cuda_manual_seed(1234)
    from megatron.core.enums import ModelType
    from megatron.model.enums import AttnMaskType
    args.model_type = ModelType.encoder_or_decoder  # pretrain_gpt.py's, set by its pretrain()
    with contextlib.redirect_stdout(io.StringIO()):
        stage = fork.transformer.ParallelTransformer(config, model_type=ModelType.encoder_or_decoder,
                                                     self_attn_mask_type=AttnMaskType.causal,
                                                     pre_process=False, post_process=False)
    if stage.num_layers != layers:
        raise SystemExit(f"zb_fork_layer.py: the fork built {stage.num_layers} layers, want {layers}")
    device = "cpu" if cpu else "cuda"
    stage = stage.to(device=device, dtype=torch.float64 if cpu else torch.float16)
    # What Megatron-LM's DDP wrapper gives each parameter: a gradient buffer in the parameter's
    # dtype (fp16 here), or in fp32 with --accumulate-allreduce-grads-in-fp32.
    for p in stage.parameters():
        p.main_grad = torch.zeros(p.shape, dtype=torch.float32 if main_grad == "fp32" else torch.float16,
                                  device=device)
    return stage, args


def passes(fork, stage, x, dy):
    """One microbatch as the fork's runtime runs it: F, B (weight GEMMs stored), W (popped)."""
    import torch
    WeightGradStore = fork.WeightGradStore
    inp = x.detach().requires_grad_()
    stage.set_input_tensor(inp)
    yield "F"
    out = stage(None, None)  # a middle stage: its input set above, attention mask unused (causal kernel)
    yield "B"
    torch.autograd.backward(out, grad_tensors=dy)
    WeightGradStore.flush()
    yield "W"
    WeightGradStore.pop()
    yield inp.grad


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
        cmd = [sys.executable, os.path.abspath(__file__), "--fork", opts.fork, "--apex", opts.apex or "",
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
        per_layer = {k: [t / layers for t in v] for k, v in times.items()}
        mean = {k: statistics.mean(v) for k, v in per_layer.items()}
        med = {k: statistics.median(v) for k, v in per_layer.items()}
        prof = profile[name]
        entry = dict(layers=layers, heads=heads, hidden=hidden, microbatch=micro, seq=seq, jit=opts.jit, fuser=jit_note,
                     main_grad=opts.main_grad,
                     softmax_fused=softmax_fused, iters=opts.iters, mean_ms=mean, median_ms=med,
                     b_over_f=mean["B"] / mean["F"], w_over_f=mean["W"] / mean["F"],
                     paper_b_over_f=prof["b"] / prof["f"], paper_w_over_f=prof["w"] / prof["f"])
        result["models"][f"{name}/{opts.jit}"] = entry
        print(f"{name:>6} {opts.jit:>8}  F {mean['F']:.3f}  B {mean['B']:.3f}  W {mean['W']:.3f} ms per layer  "
              f"B/F {entry['b_over_f']:.3f} (paper {entry['paper_b_over_f']:.3f})  "
              f"W/F {entry['w_over_f']:.3f} (paper {entry['paper_w_over_f']:.3f})  "
              f"softmax {'Apex fused' if softmax_fused else 'unfused'}", flush=True)
        del stage
        if not cpu:
            torch.cuda.empty_cache()
    if opts.out:
        write_json(opts.out, result)
    return 0


def main():
    # The paper's script sets it (before CUDA starts, where it takes effect); the fork's checks ask for it.
    os.environ["CUDA_DEVICE_MAX_CONNECTIONS"] = "1"
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--fork", required=True, help="a directory holding the Zero Bubble release's megatron/")
    ap.add_argument("--apex", help="an Apex source tree (csrc/megatron/); without it the fork's fused softmax "
                                   "and weight-gradient GEMM are missing and the run stops")
    ap.add_argument("--build-dir", default=os.path.join(ROOT, "build", "zb-fork-ext"))
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
    opts = ap.parse_args()
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
