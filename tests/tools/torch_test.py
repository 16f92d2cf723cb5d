"""The parts of the tools that need PyTorch (Debian's python3-torch): the GPT fixtures regenerated
(their words the same, their numbers
to 1e-12), and the PyTorch side of bench-vs-torch at a tiny size. Skipped, saying why, where
the interpreter cannot import torch (the build and the other tests never need it)."""
import json
import math
import os
import subprocess
import sys

import pytest

from conftest import ROOT, run_script

pytest.importorskip("torch", reason="PyTorch is not installed (apt-get install python3-torch): the torch parts are not run")


def same_numbers(got, want):
    """Whether two fixture texts hold the same lines, words and numbers, each number to 1e-12 of its
    size or 1e-12 in all (a gradient that sums to about zero): float64 sums differ in their last
    digits from one BLAS build (or CPU) to another, by 2e-15 at most on these fixtures' values of
    up to 96."""
    got, want = got.splitlines(), want.splitlines()
    if len(got) != len(want):
        return False
    for a, b in zip(got, want):
        words_a, words_b = a.split(), b.split()
        if len(words_a) != len(words_b):
            return False
        for x, y in zip(words_a, words_b):
            try:
                if not math.isclose(float(x), float(y), rel_tol=1e-12, abs_tol=1e-12):
                    return False
            except ValueError:
                if x != y:
                    return False
    return True


def test_fixtures_regenerate(tmp_path):
    done = run_script("gen-gpt-fixtures.sh", tmp_path, timeout=600)
    assert done.returncode == 0, done.stderr
    for name in ("block.txt", "model.txt"):
        fresh, kept = (tmp_path / name).read_text(), (ROOT / "tests" / "data" / "gpt" / name).read_text()
        assert same_numbers(fresh, kept), name
    # The comparison is not loose: a number moved by 1e-10 is caught.
    kept = (ROOT / "tests" / "data" / "gpt" / "block.txt").read_text()
    assert not same_numbers(kept.replace("0.010274775870210626", "0.010274775970210626"), kept)


def test_torch_peer_layers():
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(ROOT / "tools"))
    done = subprocess.run([sys.executable, "-m", "stagecraft_tools.torch_peer", "layers", "64", "8", "gelu"],
                          capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    times = json.loads(done.stdout)
    assert all(times[k] > 0 for k in ("forward_us", "backward_input_us", "backward_weight_us"))


def test_layer_probe_check():
    env = dict(os.environ, PYTHONPATH=str(ROOT / "tools"))
    done = subprocess.run([sys.executable, "-m", "stagecraft_tools.layer_probe", "--check"], capture_output=True, text=True,
                          env=env, timeout=300)
    assert done.returncode == 0 and "match autograd" in done.stdout, done.stdout + done.stderr
