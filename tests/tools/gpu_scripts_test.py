"""The scripts that need a GPU or another toolchain, on this machine: scripts/bench-gpu.sh's no-GPU
path (one line saying why, exit 0; on a machine with a usable GPU it is run by hand or by
gpu-check.sh, so the test skips there), and scripts/fuzz.sh's checks before it builds anything
(the harnesses' corpora are replayed by the fuzz tests; the fuzzing itself is run by hand), and
the pipeline ranks scripts/gpu-check.sh sizes its runs by (scenario_ranks: each scenario's as the
project's own parser reads it), in its plan."""
import re
import subprocess

import pytest

from conftest import ROOT, one_error_line, run_script
from stagecraft_tools import common, scenario_ranks


def gpu_usable():
    return subprocess.run([common.cli(), "devices", "--quiet"], capture_output=True).returncode == 0


def test_bench_gpu_without_a_gpu():
    if gpu_usable():
        pytest.skip("a usable GPU is here: bench-gpu.sh would run the whole GPU benchmark (run it by hand)")
    if not (common.build_dir() / "tests" / "bench" / "cuda_bench").is_file():
        pytest.skip("this build has no cuda backend (no tests/bench/cuda_bench): bench-gpu.sh would build first")
    done = run_script("bench-gpu.sh", env={"STAGECRAFT_BUILD": str(common.build_dir())})
    why = subprocess.run([common.cli(), "devices"], capture_output=True, text=True).stdout
    verdict = next(l for l in why.splitlines() if l.startswith("verdict: "))[len("verdict: "):]
    # That line alone: none of its four sections runs, the comparison with PyTorch included
    # (gpu_peer_bench_test checks that one on the CPU).
    assert done.returncode == 0 and done.stdout == f"bench-gpu: nothing to measure: {verdict}\n", done.stdout + done.stderr


def test_bench_gpu_takes_no_arguments():
    done = run_script("bench-gpu.sh", "x")
    assert done.returncode == 2 and done.stderr == "usage: scripts/bench-gpu.sh\n"


def test_fuzz_checks_before_building():
    done = run_script("fuzz.sh", "0")
    assert done.returncode == 2 and done.stderr == "usage: scripts/fuzz.sh [SECONDS]\n"
    done = run_script("fuzz.sh", "1", env={"FUZZ_ONLY": "csv nosuch"})
    assert done.returncode == 2 and done.stderr.startswith("fuzz.sh: FUZZ_ONLY: no harness 'nosuch' (known: scenario ")


def test_scenario_ranks_are_the_parsers():
    sc = common.module()
    files = sorted((ROOT / "scenarios").glob("*.yaml"))
    assert len(files) >= 2
    for path in files:
        try:
            want = sc.Scenario.load(str(path)).ranks
        except sc.InputError:
            want = sc.Scenario.load_for_plan(str(path)).ranks
        assert scenario_ranks.ranks(path) == want, path


@pytest.mark.parametrize("text, message", [
    ("pipeline: {ranks: 0}\n", "pipeline.ranks: expected a positive integer, got '0'"),
    ("pipeline: {ranks: two}\n", "pipeline.ranks: expected a positive integer, got 'two'"),
    ("pipeline: {schedule: 1f1b}\n", "no pipeline.ranks"),
    ("- pipeline\n", "no pipeline.ranks"),
    ("pipeline: {ranks: [\n", "not readable YAML (while parsing a flow node expected the node content, "),
])
def test_scenario_ranks_bad_input(tmp_path, text, message):
    (tmp_path / "s.yaml").write_text(text)
    line = one_error_line(run_script("tool.sh", "scenario_ranks", tmp_path / "s.yaml"), "scenario_ranks")
    assert line.startswith(f"scenario_ranks: {tmp_path / 's.yaml'}: {message}"), line


def test_gpu_check_plan_runs_each_scenario_on_its_ranks(tmp_path):
    # As many GPUs as ranks: each scenario's loop on its own ranks; one GPU: the ranks share it.
    for name in ("mlp-gpu", "gpt-gpu"):
        ranks = scenario_ranks.ranks(ROOT / "scenarios" / f"{name}.yaml")
        for gpus, sets in ((ranks, ""), (1, f" --set pipeline.ranks_per_device={ranks} --set topology.devices_per_node=1")):
            done = run_script("gpu-check.sh", "--dry-run", "--no-build", "--build-dir", common.build_dir(),
                              "--out", tmp_path / "plan", "--gpus", gpus)
            assert done.returncode == 0, done.stderr
            want = rf"^{name}: profile: \S*mpirun\.sh {ranks} \S*stagecraft profile \S*{name}\.yaml{re.escape(sets)} --backend cuda "
            assert re.search(want, done.stdout, re.M), (want, done.stdout)


def test_gpu_check_leaves_out_the_steps_gpu_check_skip_names(tmp_path):
    # A lease short of time: GPU_CHECK_SKIP's steps are printed left out and not counted in the
    # budget; every other step is still planned, and a step that needs a left-out one is left out
    # with it rather than planned.
    args = ("gpu-check.sh", "--dry-run", "--no-build", "--build-dir", common.build_dir(), "--out", tmp_path / "plan")
    whole = run_script(*args)
    assert whole.returncode == 0, whole.stderr
    skip = "^(cuda_bench|gpt-gpu.*)$"
    part = run_script(*args, env={"GPU_CHECK_SKIP": skip})
    assert part.returncode == 0, part.stderr
    left = re.findall(r"^(.*): left out \(GPU_CHECK_SKIP\)$", part.stdout, re.M)
    assert "cuda_bench" in left and "gpt-gpu: profile" in left and "gpt-gpu-4x2: execute" in left, part.stdout
    assert all(re.match(skip, name) for name in left), left
    assert re.search(r"^mlp-gpu: profile: \S*mpirun", part.stdout, re.M)
    assert not re.search(r"^gpt-gpu: profile: \S*mpirun", part.stdout, re.M)
    budget = lambda out: int(re.search(r"^budget: (\d+) s in all", out, re.M).group(1))
    planned = lambda out, name: int(re.search(rf"^{re.escape(name)}: .*  # (\d+) s$", out, re.M).group(1))
    assert budget(whole.stdout) - budget(part.stdout) == (
        planned(whole.stdout, "cuda_bench")
        + sum(int(s) for s in re.findall(r"^gpt-gpu(?:-1rank|-4x2)?: [^:]+: .*  # (\d+) s$", whole.stdout, re.M)))
