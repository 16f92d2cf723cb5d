"""The scripts that need a GPU or another toolchain, on this machine: scripts/bench-gpu.sh's no-GPU
path (one line saying why, exit 0; on a machine with a usable GPU it is run by hand or by
gpu-check.sh, so the test skips there), and scripts/fuzz.sh's checks before it builds anything
(the harnesses' corpora are replayed by the fuzz tests; the fuzzing itself is run by hand)."""
import subprocess

import pytest

from conftest import run_script
from stagecraft_tools import common


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
    assert done.returncode == 0 and done.stdout == f"bench-gpu: nothing to measure: {verdict}\n", done.stdout + done.stderr


def test_bench_gpu_takes_no_arguments():
    done = run_script("bench-gpu.sh", "x")
    assert done.returncode == 2 and done.stderr == "usage: scripts/bench-gpu.sh\n"


def test_fuzz_checks_before_building():
    done = run_script("fuzz.sh", "0")
    assert done.returncode == 2 and done.stderr == "usage: scripts/fuzz.sh [SECONDS]\n"
    done = run_script("fuzz.sh", "1", env={"FUZZ_ONLY": "csv nosuch"})
    assert done.returncode == 2 and done.stderr.startswith("fuzz.sh: FUZZ_ONLY: no harness 'nosuch' (known: scenario ")
