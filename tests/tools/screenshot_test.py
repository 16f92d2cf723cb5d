"""scripts/screenshot.sh and stagecraft_tools.screenshot: the zoom from the traces' summaries by
hand, the picture taken from traces the simulator writes (under Xvfb, where the viewer is built),
and the missing-trace error."""
import shutil
import subprocess

import pytest

from conftest import ROOT, one_error_line, run_script
from stagecraft_tools import common, screenshot


def test_range_by_hand():
    traces = [{"stagecraft": {"summary": {"step_time_ms": 10.0}}}, {"stagecraft": {"summary": {"step_time_ms": 20.0}}}, {}]
    assert screenshot.time_range(traces) == "0:43.000"  # two steps and a little of the slowest: 2.15 x 20
    assert screenshot.time_range([{}]) == ""


def traces(folder):
    """The four traces the picture needs, from the simulator (the measured one a copy of the prediction)."""
    subprocess.run([common.cli(), "simulate", ROOT / "scenarios" / "uniform-costs.yaml", "--set",
                    "pipeline.schedule=[1f1b,gpipe,zb-h1]", "--trace", folder / "predicted.trace.json"],
                   check=True, capture_output=True)
    shutil.copy(folder / "predicted.trace.1f1b.json", folder / "measured.trace.1f1b.json")


def test_picture(tmp_path):
    if not (common.build_dir() / "viz" / "stagecraft-view").is_file() or not shutil.which("xvfb-run"):
        pytest.skip("the viewer is not built here or xvfb-run is missing: no picture taken")
    traces(tmp_path)
    done = run_script("screenshot.sh", tmp_path / "shot.png", "--traces", tmp_path)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "shot.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_missing_trace_is_one_line(tmp_path):
    if not (common.build_dir() / "viz" / "stagecraft-view").is_file():
        pytest.skip("the viewer is not built here")
    line = one_error_line(run_script("screenshot.sh", tmp_path / "shot.png", "--traces", tmp_path), "screenshot.sh")
    assert line == f"screenshot.sh: {tmp_path / 'predicted.trace.1f1b.json'} is missing: run ./scripts/run.sh first"
    assert not (tmp_path / "shot.png").exists()
