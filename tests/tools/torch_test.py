"""The parts of the tools that need PyTorch (Debian's python3-torch): the GPT fixtures regenerated
byte for byte, and the PyTorch side of bench-vs-torch at a tiny size. Skipped, saying why, where
the interpreter cannot import torch (the build and the other tests never need it)."""
import json
import os
import subprocess
import sys

import pytest

from conftest import ROOT, run_script

pytest.importorskip("torch", reason="PyTorch is not installed (apt-get install python3-torch): the torch parts are not run")


def test_fixtures_regenerate_byte_for_byte(tmp_path):
    done = run_script("gen-gpt-fixtures.sh", tmp_path, timeout=600)
    assert done.returncode == 0, done.stderr
    for name in ("block.txt", "model.txt"):
        assert (tmp_path / name).read_bytes() == (ROOT / "tests" / "data" / "gpt" / name).read_bytes()


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
