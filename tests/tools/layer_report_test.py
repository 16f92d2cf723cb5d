"""scripts/layer-probe.sh on a recorded probe (tests/data/h100_layer_probe_fp16_2026-11-26.json, an
H100's run): the report's measured passes are the probe's own kernel times summed, each model's
prediction is the explain list's, and the probe itself says SKIPPED without PyTorch."""
import json
import re

from conftest import ROOT, run_script
from stagecraft_tools import block, peer_bench

PROBE = ROOT / "tests" / "data" / "h100_layer_probe_fp16_2026-11-26.json"


def test_recorded_probe(tmp_path):
    done = run_script("layer-probe.sh", "--json", PROBE, "--out", tmp_path, "--device-file", "H100-SXM")
    assert done.returncode == 0, done.stdout + done.stderr
    probe = json.loads(PROBE.read_text())
    compare = json.loads((tmp_path / "layer-probe-compare.json").read_text())
    assert [m["model"] for m in compare["models"]] == [m["model"] for m in probe["models"]]
    for m in probe["models"]:
        # The measured F, I and W per layer: the probe's kernels of each pass summed, in ms.
        sums = {q: sum(k["us"] for k in m["kernels"] if k["pass"] == q) / 1e3 for q in "FIW"}
        row = next(l for l in (tmp_path / "layer-probe.md").read_text().splitlines() if l.startswith(f"| {m['model']} |"))
        measured = [float(x) for x in re.findall(r"\| ([0-9.]+) / [0-9.]+ ", row)[:3]]
        assert measured == [round(sums[q], 3) for q in "FIW"], (row, sums)
    assert "What this run implies for H100-SXM's file" in done.stdout


def test_zero_bubble_split_by_hand():
    kernels = {("F", "qkv"): 10.0, ("I", "qkv.dX"): 6.0, ("W", "qkv.dW"): 4.0, ("W", "qkv.db"): 1.0, ("W", "ln1.dgamma"): 0.5}
    by_pass, zb = block.passes(kernels)
    assert by_pass == {"F": 10.0, "I": 6.0, "W": 5.5}
    assert zb == {"F": 10.0, "B": 7.5, "W": 4.0}  # the runtime's W holds the weight GEMMs alone


def test_probe_without_torch_says_skipped(tmp_path):
    if peer_bench.have_torch():
        return  # timed in torch_test.py
    done = run_script("layer-probe.sh", "--out", tmp_path, env={"PYTHON": "/usr/bin/python3"})
    assert done.returncode == 0 and done.stdout.startswith("SKIPPED: the layer probe needs PyTorch"), done.stdout + done.stderr
