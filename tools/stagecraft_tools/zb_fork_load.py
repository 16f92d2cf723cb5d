"""The Zero Bubble release's middle stage as zb_fork_layer runs it: the stand-ins its Megatron-LM
fork gets at import for what the layer never calls, Apex's two extensions built with nvcc, the
fork's ParallelTransformer built by its own argument parser, and one microbatch's F, B and W as
its runtime runs them.

Nothing here imports PyTorch at import time: the stand-ins and the helpers of plain arithmetic
are tested where PyTorch is missing (tests/tools/zb_fork_layer_test.py).
"""

import contextlib
import importlib.abc
import importlib.machinery
import io
import os
import sys
import time
import types

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
