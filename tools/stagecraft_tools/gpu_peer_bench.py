"""stagecraft's cuda backend beside PyTorch on one GPU (scripts/bench-gpu.sh, section 4): the model
and batch of scenarios/gpt-gpu.yaml (as its file states them) trained, one after the other on the
same GPU, by
  - stagecraft: `execute --backend cuda` on one rank, 1F1B (one stage: no bubble, no transfer);
  - PyTorch eager and PyTorch through torch.compile: torch_peer's gpt_train, the same GPT (untied
    head, no dropout, attention as written), fp32 parameters in the scenario's training.dtype
    (tf32: TF32 matmuls; bf16: autocast), fused Adam;
each as samples/s over the timed steps after the same warm-up steps (untimed on both sides:
torch.compile's compile is in the first), the median of REPEATS runs with min..max, the ratios of
stagecraft's to both, and the verdict against the target, stagecraft >= torch.compile. A benchmark:
exits 0 whatever the ratio. Without PyTorch, or without torch.compile (PyTorch < 2.0) or where it
fails, the row says "not available" and why; a failed stagecraft or eager run is one error line.
Without a usable GPU (`stagecraft devices`) it says why in one line and exits 0.
PyTorch is the first of $TORCH_PYTHON, the python3 on PATH and /usr/bin/python3 that imports torch
(and, on cuda, sees a GPU).
Usage: scripts/tool.sh gpu_peer_bench [REPEATS] [--scenario FILE] [--device cuda|cpu] [--steps N] [--warmup N]
"""
import dataclasses
import os
import shutil
import statistics
import subprocess
import tempfile
from pathlib import Path

from . import common, peer_bench

SCENARIO = common.SCENARIOS / "gpt-gpu.yaml"
ONE_RANK = ["pipeline.ranks=1", "pipeline.schedule=1f1b"]
DTYPES = ("fp32", "tf32", "bf16")  # what torch_peer's gpt_train trains in
# The GPT-2 block torch_peer builds; dropout is read by the simulator alone (neither the executor's
# block nor the peer's has any).
GPT2_KEYS = {"layers", "hidden", "heads", "seq", "vocab", "dtype", "dropout"}
GPT2_DEFAULTS = {"tied_embeddings": False, "activation": "gelu"}  # stated, they must be these
INFO_TIMEOUT_S = 120
PEER_TIMEOUT_S = 1800  # one PyTorch run, its compile included: a hung run ends here


@dataclasses.dataclass
class Row:
    """One line of the table: its label and the samples/s of each run, or why there are none."""
    label: str
    values: list = dataclasses.field(default_factory=list)
    reason: str = None

    def median(self):
        return None if self.reason is not None or not self.values else statistics.median(self.values)


def model(scenario, path):
    """(L, C, NH, T, V, B, M) of a scenario, as torch_peer's gpt_train takes them; a ToolError
    naming the key of a model the peer does not build."""
    transformer = ((scenario or {}).get("model") or {}).get("transformer")
    if not isinstance(transformer, dict):
        raise common.ToolError(f"{path}: no model.transformer: the PyTorch peer builds a GPT")
    for key, value in transformer.items():
        if key not in GPT2_KEYS and GPT2_DEFAULTS.get(key, object()) != value:
            raise common.ToolError(f"{path}: model.transformer.{key}: {value}: the PyTorch peer builds GPT-2's block "
                                   "alone (untied head, GELU, 4 x hidden, every head its own keys and values)")
    return peer_bench.gpt_shape(scenario)


def precision_of(run, path):
    """The precision stagecraft's run trained in (its execute JSON's `precision`: the scenario's
    training.dtype as stagecraft resolves it), which the peer trains in too; a ToolError where the
    peer cannot."""
    dtype = run.get("precision")
    if dtype is None:
        raise common.ToolError(f"{path}: execute --json states no precision (a stagecraft older than its `precision`)")
    if dtype not in DTYPES:
        raise common.ToolError(f"{path}: training.dtype {dtype}: the PyTorch peer trains in {', '.join(DTYPES)}")
    return dtype


def unusable(device):
    """Why stagecraft's `device` backend cannot run here (`stagecraft devices`' verdict), or None."""
    if device != "cuda" or subprocess.run([common.cli(), "devices", "--quiet"], capture_output=True).returncode == 0:
        return None
    text = subprocess.run([common.cli(), "devices"], capture_output=True, text=True).stdout
    return next((l[len("verdict: "):] for l in text.splitlines() if l.startswith("verdict: ")), "no verdict")


def samples_after_warmup(run, warmup):
    """Samples/s of an `execute --json`'s first schedule over its steps after the first `warmup`:
    its samples per step times those steps over their time (step_ms)."""
    s = run["schedules"][0]
    timed = s["step_ms"][warmup:]
    if not timed:
        raise common.ToolError(f"the run has {len(s['step_ms'])} steps: none after {warmup} warm-up steps")
    return s["microbatches"] * s["microbatch_size"] * s.get("data_parallel", 1) * len(timed) * 1e3 / sum(timed)


def torch_candidates(env=os.environ):
    """Where to look for PyTorch, in order: $TORCH_PYTHON, the python3 on PATH (a GPU machine's
    venv), Debian's /usr/bin/python3; each once."""
    found = [env.get("TORCH_PYTHON"), shutil.which("python3", path=env.get("PATH")), peer_bench.TORCH_PYTHON]
    return list(dict.fromkeys(p for p in found if p))


def find_torch(device, candidates):
    """The first of `candidates` whose PyTorch runs on `device`: (python, torch_peer's info, None),
    or (None, None, why none does)."""
    why = []
    for python in candidates:
        try:
            info = peer_bench.torch_peer("info", python=python, timeout=INFO_TIMEOUT_S)
        except common.ToolError as e:
            why.append(f"{python}: {str(e).split(': ', 1)[-1]}")
            continue
        if device == "cuda" and not info["cuda"]:
            why.append(f"{python}: PyTorch {info['torch']} sees no CUDA device")
            continue
        return python, info, None
    return None, None, f"no PyTorch here runs on {device} ({'; '.join(why)})"


def peer_args(shape, steps, device, mode, dtype, warmup):
    """torch_peer's gpt_train command line for one run."""
    return ["gpt_train", *shape, steps, "--device", device, "--mode", mode, "--dtype", dtype, "--warmup", warmup]


def peer_run(python, args, mode):
    """One PyTorch run: (samples/s, None), or for the compiled model (None, why not) where
    torch.compile is absent or fails in any way; an eager run's failure is a ToolError."""
    try:
        got = peer_bench.torch_peer(*args, python=python, timeout=PEER_TIMEOUT_S)
    except common.ToolError as e:
        if mode != "compiled":
            raise
        return None, str(e)
    if not got["available"]:
        return None, got["reason"]
    return got["samples_per_s"], None


def stagecraft_run(scenario, device, steps, warmup, tmp, name):
    """One `execute` on one rank: (samples/s over its steps after the warm-up ones, its precision)."""
    out = Path(tmp) / f"{name}.json"
    sets = common.sets([*ONE_RANK, f"pipeline.steps={warmup + steps}"])
    common.mpirun(1, [common.cli(), "execute", scenario, "--backend", device, *sets, "--json", out], Path(tmp) / f"{name}.log")
    run = common.read_json(out)
    return samples_after_warmup(run, warmup), precision_of(run, scenario)


def table(rows):
    """Each row's median samples/s and min..max, or why it has none."""
    lines = [f"{'':<34} {'samples/s':>10}  (min..max)"]
    for row in rows:
        if row.median() is None:
            lines.append(f"{row.label:<34} not available: {row.reason}")
        else:
            median, spread = peer_bench.stats(row.values)
            lines.append(f"{row.label:<34} {median:10.1f}  ({spread})")
    return lines


def ratios(ours, peers):
    """stagecraft's median samples/s over each peer's."""
    parts = [f"stagecraft / {p.label}: " + (f"{ours.median() / p.median():.2f}" if p.median() else "not available") for p in peers]
    return "; ".join(parts)


def verdict(ours, compiled):
    """The target, stagecraft >= torch.compile, judged on the medians."""
    if compiled.median() is None:
        return "verdict: none: no torch.compile samples/s to judge against (its row says why)"
    r = ours.median() / compiled.median()
    return f"verdict: {'MET' if r >= 1 else 'NOT MET'}: stagecraft at {r:.2f}x torch.compile's samples/s (target >= 1.00x)"


def header(path, shape, device, python, info, steps, warmup, repeats):
    L, C, NH, T, V, B, M = shape
    where = f"on {info['gpu']}" if device == "cuda" and info else f"on {device}"
    peer = f"PyTorch {info['torch']} ({python}) {where}" if info else "PyTorch: none"
    return [f"{Path(path).name}: {L} blocks, hidden {C}, {NH} heads, seq {T}, vocab {V}; {M} x {B} sequences per Adam step; "
            "the peer in the precision stagecraft's run states",
            f"stagecraft: execute --backend {device}, 1 rank, 1f1b; {peer}",
            f"samples/s over {steps} timed steps after {warmup} untimed warm-up step{'s' * (warmup != 1)} on every side "
            f"(torch.compile compiles in the first); median of {repeats} runs (min..max)"]


class Bench:
    def __init__(self, scenario, device, steps, warmup, tmp):
        self.scenario, self.device, self.steps, self.warmup, self.tmp = scenario, device, steps, warmup, tmp
        self.shape, self.dtype = model(common.read_yaml(scenario), scenario), None

    def run(self, repeats, python, why_none):
        """REPEATS rounds of stagecraft, eager, compiled; a line per round as it ends. The
        compiled model, once not available, is not tried again."""
        ours = Row("stagecraft")
        peers = [Row("PyTorch eager", reason=why_none), Row("PyTorch torch.compile", reason=why_none)]
        for k in range(repeats):
            value, dtype = stagecraft_run(self.scenario, self.device, self.steps, self.warmup, self.tmp, f"run.{k}")
            ours.values.append(value)
            if self.dtype is None:
                self.dtype = dtype
                print(f"precision: {dtype} (stagecraft's execute --json)", flush=True)
            for row, mode in zip(peers, ("eager", "compiled")):
                if row.reason is None:
                    value, row.reason = peer_run(python, peer_args(self.shape, self.steps, self.device, mode, self.dtype,
                                                                   self.warmup), mode)
                    row.values += [value] if value is not None else []
            done = ", ".join(f"{r.label} {r.values[-1]:.1f}" for r in [ours, *peers] if r.reason is None)
            print(f"run {k + 1}/{repeats}: {done} samples/s", flush=True)
        return ours, peers


def main(argv):
    parser = common.ArgumentParser(prog="gpu_peer_bench", description=__doc__.splitlines()[0])
    parser.add_argument("repeats", nargs="?", default="3", help="runs of each side (default 3)")
    parser.add_argument("--scenario", default=str(SCENARIO), help="the model and batch (default scenarios/gpt-gpu.yaml)")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda",
                        help="cpu: both sides on this machine's CPU (a check of the tool, not the comparison)")
    parser.add_argument("--steps", default="10", help="timed steps of each run (default 10)")
    parser.add_argument("--warmup", default="3", help="untimed steps before them, every side (default 3)")
    args = parser.parse_args(argv)
    repeats = common.positive_int(args.repeats, "REPEATS")
    steps, warmup = common.positive_int(args.steps, "--steps"), common.positive_int(args.warmup, "--warmup")
    why = unusable(args.device)
    if why:
        print(f"gpu_peer_bench: nothing to measure: {why}")
        return 0
    common.run([common.cli(), "simulate", args.scenario, *common.sets(ONE_RANK)])  # one rank of it is a valid run
    with tempfile.TemporaryDirectory() as tmp:
        bench = Bench(args.scenario, args.device, steps, warmup, tmp)
        python, info, why_none = find_torch(args.device, torch_candidates())
        print("\n".join(header(args.scenario, bench.shape, args.device, python, info, steps, warmup, repeats)),
              flush=True)
        ours, peers = bench.run(repeats, python, why_none)
    print("\n".join(table([ours, *peers])))
    print(ratios(ours, peers))
    print(verdict(ours, peers[1]))
    return 0


if __name__ == "__main__":
    raise SystemExit(common.entry("gpu_peer_bench", main))
