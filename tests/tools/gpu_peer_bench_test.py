"""stagecraft_tools.gpu_peer_bench (scripts/bench-gpu.sh's PyTorch section) on this machine: the model
and precision read from a scenario as its file states them, the table's arithmetic and the verdict
on hand-made runs, how a PyTorch is chosen and a failed compile reported (with stand-in
interpreters), the cuda path's commands and table with stand-ins for a stagecraft that sees a GPU
and a PyTorch 2 with CUDA, and, where PyTorch is here, torch_peer's GPT against the GPT-2 fixture,
a tiny training run on the CPU (eager; compiled says why not on PyTorch 1.x) and the whole bench at
a tiny size with both sides on the CPU. The real GPU run needs a GPU: bench-gpu.sh's no-GPU path
is gpu_scripts_test's."""
import json
import os
import re
import subprocess

import pytest

from conftest import ROOT, one_error_line, run_script
from stagecraft_tools import common, gpu_peer_bench as gpb, peer_bench

HAVE_TORCH = peer_bench.have_torch()
NO_TORCH = f"PyTorch is not installed ({peer_bench.TORCH_PYTHON} cannot import torch; apt-get install python3-torch)"
TINY = {"layers": 2, "hidden": 64, "heads": 2, "seq": 32, "vocab": 256}


def scenario(**transformer_and_training):
    """A GPT scenario as a dict: the tiny model, 4 x 2 sequences, with keys replaced."""
    training = transformer_and_training.pop("training", {"optimizer": "adam", "dtype": "fp32"})
    return {"model": {"transformer": {**TINY, **transformer_and_training}},
            "pipeline": {"ranks": 1, "microbatches": 4, "microbatch_size": 2}, "training": training}


def stand_in(tmp_path, name, stdout="", stderr="", status=0):
    """An executable that answers every call as a Python running torch_peer would: `stdout`, `stderr`, `status`."""
    path = tmp_path / name
    path.write_text(f"#!/bin/sh\nprintf '%b' '{stdout}'\nprintf '%s\\n' '{stderr}' >&2\nexit {status}\n")
    path.chmod(0o755)
    return str(path)


def test_gpt_gpu_as_its_file_states():
    # scenarios/gpt-gpu.yaml: 12 layers, hidden 768, 12 heads, seq 1024, vocab 50304; 8 microbatches of 2; training.dtype tf32.
    assert gpb.model(common.read_yaml(gpb.SCENARIO), gpb.SCENARIO) == (12, 768, 12, 1024, 50304, 2, 8)


def test_the_precision_is_the_one_stagecrafts_run_states():
    assert gpb.precision_of({"precision": "bf16"}, "s") == "bf16"
    with pytest.raises(common.ToolError, match=r"^s: training\.dtype fp16: the PyTorch peer trains in fp32, tf32, bf16$"):
        gpb.precision_of({"precision": "fp16"}, "s")
    with pytest.raises(common.ToolError, match=r"^s: execute --json states no precision"):
        gpb.precision_of({}, "s")


def test_only_the_gpt2_block_is_built():
    assert gpb.model(scenario(tied_embeddings=False, activation="gelu", dropout=True), "s") == (2, 64, 2, 32, 256, 2, 4)
    for key, value in (("tied_embeddings", True), ("activation", "swiglu"), ("kv_heads", 1), ("moe", {"experts": 8})):
        with pytest.raises(common.ToolError, match=rf"^s: model\.transformer\.{key}: .*the PyTorch peer builds GPT-2's block"):
            gpb.model(scenario(**{key: value}), "s")
    with pytest.raises(common.ToolError, match=r"^s: no model\.transformer"):
        gpb.model({"model": {"mlp": {"layers": 2}}}, "s")


def test_stagecraft_samples_after_its_warmup_by_hand():
    run = {"schedules": [{"microbatches": 8, "microbatch_size": 2, "step_ms": [50.0, 10.0, 20.0, 30.0]}]}
    # After 1 warm-up step: 3 steps of 16 samples in 60 ms = 800 samples/s; after 3: 16 in 30 ms.
    assert gpb.samples_after_warmup(run, 1) == pytest.approx(800.0)
    assert gpb.samples_after_warmup(run, 3) == pytest.approx(16 / 0.030)
    with pytest.raises(common.ToolError, match=r"^the run has 4 steps: none after 4 warm-up steps$"):
        gpb.samples_after_warmup(run, 4)


def test_table_ratios_and_verdict_by_hand():
    ours = gpb.Row("stagecraft", [90.0, 110.0, 100.0])
    eager = gpb.Row("PyTorch eager", [60.0, 40.0, 50.0])
    compiled = gpb.Row("PyTorch torch.compile", [130.0, 125.0, 120.0])
    assert gpb.table([ours, eager, compiled]) == [
        "                                    samples/s  (min..max)",
        "stagecraft                              100.0  (90.0..110.0)",
        "PyTorch eager                            50.0  (40.0..60.0)",
        "PyTorch torch.compile                   125.0  (120.0..130.0)"]
    # 100 / 50 = 2.00; 100 / 125 = 0.80: below the target.
    assert gpb.ratios(ours, [eager, compiled]) == "stagecraft / PyTorch eager: 2.00; stagecraft / PyTorch torch.compile: 0.80"
    assert gpb.verdict(ours, compiled) == "verdict: NOT MET: stagecraft at 0.80x torch.compile's samples/s (target >= 1.00x)"
    assert gpb.verdict(ours, gpb.Row("c", [100.0])) == "verdict: MET: stagecraft at 1.00x torch.compile's samples/s (target >= 1.00x)"


def test_a_row_not_available_says_why():
    ours, none = gpb.Row("stagecraft", [100.0]), gpb.Row("PyTorch torch.compile", reason="torch.compile is not in PyTorch 1.13")
    assert gpb.table([none])[1] == "PyTorch torch.compile              not available: torch.compile is not in PyTorch 1.13"
    assert gpb.ratios(ours, [none]) == "stagecraft / PyTorch torch.compile: not available"
    assert gpb.verdict(ours, none) == "verdict: none: no torch.compile samples/s to judge against (its row says why)"
    assert gpb.Row("r", [1.0], reason="failed later").median() is None


def test_where_pytorch_is_looked_for(tmp_path):
    stand_in(tmp_path, "python3")
    env = {"TORCH_PYTHON": "/opt/torch/bin/python", "PATH": str(tmp_path)}
    assert gpb.torch_candidates(env) == ["/opt/torch/bin/python", str(tmp_path / "python3"), "/usr/bin/python3"]
    assert gpb.torch_candidates({"TORCH_PYTHON": "/usr/bin/python3", "PATH": "/nonexistent"}) == ["/usr/bin/python3"]


def test_the_first_pytorch_that_runs_there_is_chosen(tmp_path):
    cpu_only = stand_in(tmp_path, "cpu_only", stdout='{"torch": "2.5.1", "compile": true, "cuda": false, "gpu": null}')
    gpu = stand_in(tmp_path, "gpu", stdout='{"torch": "2.5.1", "compile": true, "cuda": true, "gpu": "NVIDIA H200"}')
    missing = str(tmp_path / "missing")
    python, info, why = gpb.find_torch("cuda", [missing, cpu_only, gpu])
    assert (python, info["gpu"], why) == (gpu, "NVIDIA H200", None)
    assert gpb.find_torch("cpu", [cpu_only, gpu])[0] == cpu_only
    python, info, why = gpb.find_torch("cuda", [missing, cpu_only])
    assert python is None and info is None
    assert why == (f"no PyTorch here runs on cuda ({missing}: cannot run {missing}: No such file or directory; "
                   f"{cpu_only}: PyTorch 2.5.1 sees no CUDA device)")


def test_a_compile_that_fails_is_not_available(tmp_path):
    crashed = stand_in(tmp_path, "crashed", stderr="RuntimeError: inductor died", status=1)
    args = ["gpt_train", 1, 2, 3]
    value, why = gpb.peer_run(crashed, args, "compiled")
    assert value is None and why == "torch_peer gpt_train 1 2 3 failed: RuntimeError: inductor died"
    with pytest.raises(common.ToolError, match="failed: RuntimeError: inductor died$"):
        gpb.peer_run(crashed, args, "eager")  # an eager run's failure is the bench's
    absent = stand_in(tmp_path, "absent", stdout='{"available": false, "reason": "torch.compile is not in PyTorch 1.13"}')
    assert gpb.peer_run(absent, args, "compiled") == (None, "torch.compile is not in PyTorch 1.13")
    # What PyTorch prints before the JSON is passed over: the JSON is the last line.
    chatty = stand_in(tmp_path, "chatty", stdout='W1130 compiling...\\n{"available": true, "samples_per_s": 12.5}\\n')
    assert gpb.peer_run(chatty, args, "compiled") == (12.5, None)


def test_peer_command_line():
    assert gpb.peer_args((12, 768, 12, 1024, 50304, 2, 8), 10, "cuda", "compiled", "tf32", 3) == [
        "gpt_train", 12, 768, 12, 1024, 50304, 2, 8, 10, "--device", "cuda", "--mode", "compiled", "--dtype", "tf32",
        "--warmup", 3]


def test_bad_input_is_one_line(tmp_path):
    assert one_error_line(run_script("tool.sh", "gpu_peer_bench", "0"), "gpu_peer_bench") == \
        "gpu_peer_bench: REPEATS: expected a positive integer, got '0'"
    (tmp_path / "s.yaml").write_text("pipeline: {ranks: 1}\n")
    line = one_error_line(run_script("tool.sh", "gpu_peer_bench", "--scenario", tmp_path / "s.yaml", "--device", "cpu"),
                          "gpu_peer_bench")
    assert line.startswith("gpu_peer_bench: stagecraft simulate ") and "failed" in line, line


def test_without_a_gpu_nothing_to_measure():
    if subprocess.run([common.cli(), "devices", "--quiet"], capture_output=True).returncode == 0:
        pytest.skip("a usable GPU is here: the bench would run (scripts/bench-gpu.sh runs it)")
    why = subprocess.run([common.cli(), "devices"], capture_output=True, text=True).stdout
    verdict = next(l for l in why.splitlines() if l.startswith("verdict: "))[len("verdict: "):]
    done = run_script("tool.sh", "gpu_peer_bench")
    assert done.returncode == 0 and done.stdout == f"gpu_peer_bench: nothing to measure: {verdict}\n", done.stdout + done.stderr


def torch_peer(*args):
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(ROOT / "tools"))
    return subprocess.run([peer_bench.TORCH_PYTHON, "-m", "stagecraft_tools.torch_peer", *map(str, args)],
                          capture_output=True, text=True, env=env, timeout=300)


@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
def test_gpt_train_on_the_cpu(dtype):
    if not HAVE_TORCH:
        pytest.skip(NO_TORCH)
    done = torch_peer("gpt_train", 1, 32, 2, 16, 64, 2, 3, 2, "--dtype", dtype, "--warmup", 2)
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout)
    assert got["available"] and (got["mode"], got["device"], got["dtype"]) == ("eager", "cpu", dtype)
    assert (got["warmup_steps"], got["steps"]) == (2, 2) and got["samples_per_s"] > 0
    # 2 steps of 3 x 2 sequences: samples/s and ms per step are one measurement.
    assert got["samples_per_s"] == pytest.approx(2 * 3 * 2 / (2 * got["step_ms"] / 1e3))


def test_compiled_without_torch_compile_says_so():
    if not HAVE_TORCH:
        pytest.skip(NO_TORCH)
    version = subprocess.run([peer_bench.TORCH_PYTHON, "-c", "import torch; print(torch.__version__, hasattr(torch, 'compile'))"],
                             capture_output=True, text=True).stdout.split()
    if version[1] == "True":
        pytest.skip(f"PyTorch {version[0]} has torch.compile (compiling on the CPU is not checked here)")
    done = torch_peer("gpt_train", 1, 32, 2, 16, 64, 2, 3, 2, "--mode", "compiled")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"available": False, "mode": "compiled", "torch": version[0],
                                       "reason": f"torch.compile is not in PyTorch {version[0]} (it came with 2.0)"}
    done = torch_peer("gpt_train", 1, 32, 2, 16, 64, 2, 3, 2, "--mode", "compiled", "--warmup", 0)
    assert done.returncode == 2 and "--warmup 0: the compiled model's first step compiles it" in done.stderr


def fixture(path):
    """tests/data/gpt's text fixture: {name: (shape, values)} and its config."""
    tensors, config, name = {}, {}, None
    for line in path.read_text().splitlines():
        if line.startswith("config "):
            config = {k: float(v) for k, v in (kv.split("=") for kv in line.split()[1:])}
        elif line.startswith("tensor "):
            name, *shape = line.split()[1:]
            tensors[name] = ([int(d) for d in shape], [])
        elif name and line and not line.startswith("#"):
            tensors[name][1].extend(float(v) for v in line.split())
    return tensors, config


def test_the_peers_gpt_is_the_fixtures():
    # tests/data/gpt/model.txt (made by gpt_fixtures.py, its own GPT, in float64): the loss and
    # every parameter's gradient of torch_peer's module, fed the same parameters.
    torch = pytest.importorskip("torch", reason=NO_TORCH)
    from stagecraft_tools import torch_peer
    tensors, config = fixture(ROOT / "tests" / "data" / "gpt" / "model.txt")
    t = {k: torch.tensor(v, dtype=torch.float64).reshape(shape) for k, (shape, v) in tensors.items()}
    names = list(torch_peer.gpt_block_params(2, torch.Generator()))
    blocks = [{n: (t[f"h.{i}.{n}.w"], t[f"h.{i}.{n}.b"]) for n in names} for i in range(int(config["L"]))]
    gpt = torch_peer.Gpt(blocks, t["wte"], t["wpe"], (t["lnf.w"], t["lnf.b"]), t["lm_head.w"], int(config["NH"]))
    loss = gpt(t["tokens"].long(), t["targets"].long())
    loss.backward()
    assert abs(loss.item() - t["loss"].item()) <= 1e-10 + 1e-10 * abs(t["loss"].item())
    grads = {"wte": gpt.wte, "wpe": gpt.wpe, "lnf.w": gpt.lnf[0], "lnf.b": gpt.lnf[1], "lm_head.w": gpt.head}
    for i, block in enumerate(gpt.blocks):
        grads.update({f"h.{i}.{n}.{wb}": getattr(block, f"{n}_{wb}") for n in names for wb in "wb"})
    assert len(grads) == sum(k.startswith("grad.") for k in t)
    for name, param in grads.items():
        ref = t[f"grad.{name}"]
        assert ((param.grad - ref).abs() <= 1e-10 + 1e-8 * ref.abs()).all(), name


def test_the_bench_at_a_tiny_size_on_the_cpu(tmp_path):
    # Both sides on this machine's CPU (the cpu backend trains fp32 only): stagecraft's row is a
    # measurement; PyTorch's rows are measured or say why not.
    text = (ROOT / "scenarios" / "gpt-gpu.yaml").read_text()
    text = text.replace("layers: 12, hidden: 768, heads: 12, seq: 1024, vocab: 50304", "layers: 1, hidden: 32, heads: 2, seq: 16, vocab: 64")
    (tmp_path / "tiny.yaml").write_text(text.replace("dtype: tf32", "dtype: fp32"))
    done = run_script("tool.sh", "gpu_peer_bench", "1", "--scenario", tmp_path / "tiny.yaml", "--device", "cpu", "--steps", "2",
                      "--warmup", "1", timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert out.startswith("tiny.yaml: 1 blocks, hidden 32, 2 heads, seq 16, vocab 64; 8 x 2 sequences per Adam step; "
                          "the peer in the precision stagecraft's run states\nstagecraft: execute --backend cpu, 1 rank, 1f1b; "), out
    assert "\nprecision: fp32 (stagecraft's execute --json)\n" in out, out
    assert float(re.search(r"^stagecraft +([0-9.]+)  \(", out, re.M).group(1)) > 0, out
    if gpb.find_torch("cpu", gpb.torch_candidates())[0]:  # the PyTorch the bench finds, as it looks for one
        assert float(re.search(r"^PyTorch eager +([0-9.]+)  \(", out, re.M).group(1)) > 0, out
        assert re.search(r"^stagecraft / PyTorch eager: [0-9.]+;", out, re.M), out
    else:
        assert re.search(r"^PyTorch eager +not available: no PyTorch here runs on cpu \(", out, re.M), out
    if not re.search(r"^PyTorch torch\.compile +[0-9.]+  \(", out, re.M):
        assert re.search(r"^PyTorch torch\.compile +not available: \S", out, re.M), out
        assert out.endswith("verdict: none: no torch.compile samples/s to judge against (its row says why)\n"), out
    else:
        assert re.search(r"^verdict: (MET|NOT MET): stagecraft at [0-9.]+x", out, re.M), out


FAKE_STAGECRAFT = """#!/usr/bin/python3
import json, os, sys
args = sys.argv[1:]
with open(os.environ["FAKE_LOG"], "a") as log:
    log.write(" ".join(["stagecraft", *args]) + "\\n")
if args[0] == "execute":  # 3 steps of 500 ms, then 10 of 100 ms
    with open(args[args.index("--json") + 1], "w") as fh:
        json.dump({"precision": "tf32",
                   "schedules": [{"microbatches": 8, "microbatch_size": 2, "step_ms": [500.0] * 3 + [100.0] * 10}]}, fh)
"""
FAKE_TORCH = """#!/usr/bin/python3
import json, os, sys
args = sys.argv[3:]  # after -m stagecraft_tools.torch_peer
with open(os.environ["FAKE_LOG"], "a") as log:
    log.write(" ".join(["torch_peer", *args]) + "\\n")
if args[0] == "info":
    print(json.dumps({"torch": "2.9.0", "compile": True, "cuda": True, "gpu": "NVIDIA H200"}))
else:
    print(json.dumps({"available": True, "samples_per_s": 200.0 if "compiled" in args else 80.0}))
"""


def test_the_gpu_run_with_stand_ins(tmp_path):
    # The cuda path as bench-gpu.sh takes it, on stand-ins for a stagecraft that sees a GPU and a
    # PyTorch 2 with CUDA: the commands it runs, and its table worked by hand. stagecraft: 16
    # samples a step, 10 timed steps of 100 ms after the 3 warm-up ones: 160 samples/s; PyTorch
    # eager 80 (160 / 80 = 2.00), torch.compile 200 (160 / 200 = 0.80: not met).
    for name, text in (("stagecraft", FAKE_STAGECRAFT), ("python", FAKE_TORCH)):
        (tmp_path / name).write_text(text)
        (tmp_path / name).chmod(0o755)
    log = tmp_path / "log"
    done = run_script("tool.sh", "gpu_peer_bench", "2", env={"STAGECRAFT": str(tmp_path / "stagecraft"), "FAKE_LOG": str(log),
                                                             "TORCH_PYTHON": str(tmp_path / "python")})
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines() == [
        "gpt-gpu.yaml: 12 blocks, hidden 768, 12 heads, seq 1024, vocab 50304; 8 x 2 sequences per Adam step; "
        "the peer in the precision stagecraft's run states",
        f"stagecraft: execute --backend cuda, 1 rank, 1f1b; PyTorch 2.9.0 ({tmp_path / 'python'}) on NVIDIA H200",
        "samples/s over 10 timed steps after 3 untimed warm-up steps on every side (torch.compile compiles in the first); "
        "median of 2 runs (min..max)",
        "precision: tf32 (stagecraft's execute --json)",
        "run 1/2: stagecraft 160.0, PyTorch eager 80.0, PyTorch torch.compile 200.0 samples/s",
        "run 2/2: stagecraft 160.0, PyTorch eager 80.0, PyTorch torch.compile 200.0 samples/s",
        "                                    samples/s  (min..max)",
        "stagecraft                              160.0  (160.0..160.0)",
        "PyTorch eager                            80.0  (80.0..80.0)",
        "PyTorch torch.compile                   200.0  (200.0..200.0)",
        "stagecraft / PyTorch eager: 2.00; stagecraft / PyTorch torch.compile: 0.80",
        "verdict: NOT MET: stagecraft at 0.80x torch.compile's samples/s (target >= 1.00x)"]
    calls = [re.sub(r" --json \S+$", " --json OUT", line) for line in log.read_text().splitlines()]
    one_rank = "--set pipeline.ranks=1 --set pipeline.schedule=1f1b"
    execute = f"stagecraft execute {gpb.SCENARIO} --backend cuda {one_rank} --set pipeline.steps=13 --json OUT"
    peer = "torch_peer gpt_train 12 768 12 1024 50304 2 8 10 --device cuda --mode {} --dtype tf32 --warmup 3"
    assert calls == ["stagecraft devices --quiet", f"stagecraft simulate {gpb.SCENARIO} {one_rank}", "torch_peer info",
                     *[execute, peer.format("eager"), peer.format("compiled")] * 2], calls
