"""scripts/what-if.sh and stagecraft_tools.what_if: drift and summaries on hand-made runs, and one
round at a tiny size (one what-if schedule at m, m/2 and 2m) whose report matches its files."""
import json
import re

from conftest import one_error_line, run_script
from stagecraft_tools import what_if

TINY = ["--set", "pipeline.steps=2", "--set", "pipeline.microbatches=4", "--set", "model.mlp.hidden=64",
        "--set", "pipeline.microbatch_size=8"]


def run(*forward_ms):
    return {"schedules": [{"stages": [{"forward_ms": f} for f in forward_ms]}]}


def test_pair_by_hand():
    compare = {"schedules": [{"step_time_ms": {"predicted": 9.7, "measured": 10.0, "error_pct": -3.0},
                              "bubble_fraction": {"error_pp": 0.5}}]}
    pair = what_if.pair_of(1, "zb-h1", 8, run(1.0, 1.0), run(1.0, 1.05), compare)
    assert abs(pair.drift - 2.5) < 1e-9  # F summed 2.0 -> 2.05: +2.5%
    lines = what_if.report([pair, pair._replace(error=1.0, drift=0.5)])
    assert lines[2].endswith("(drifted)") and not lines[3].endswith("(drifted)")
    assert lines[5] == ("where the machine's speed held (|F drift| < 2%): 1 runs, what-if |step-time error| median 1.0%, "
                        "largest 1.0%; largest |bubble error| 0.5 pp")
    assert lines[6].startswith("all: 2 runs, what-if |step-time error| median 2.0%, largest 3.0%")  # |-3|, |1|
    assert what_if.summary("none held", []) == "none held: none"


def test_one_round_at_a_tiny_size(tmp_path):
    done = run_script("what-if.sh", "1", "--schedules", "zb-h1", "--out", tmp_path, *TINY)
    assert done.returncode == 0, done.stdout + done.stderr
    rows = re.findall(r"^ +1 zb-h1 +(\d+) +([0-9.]+) +([0-9.]+) +([+-][0-9.]+)%", done.stdout, re.M)
    assert [int(r[0]) for r in rows] == [4, 2, 8]  # m, m/2, 2m
    for mb, predicted, measured, _ in rows:
        whatif = json.loads((tmp_path / "run1" / f"zb-h1.{mb}.whatif.json").read_text())["schedules"][0]
        assert abs(whatif["step_time_ms"] - float(predicted)) < 0.001 and whatif["microbatches"] == int(mb)
        executed = json.loads((tmp_path / "run1" / f"zb-h1.{mb}.measured.json").read_text())["schedules"][0]
        assert executed["schedule"] == "zb-h1" and executed["microbatches"] == int(mb)
    assert re.search(r"^all: 3 runs, ", done.stdout, re.M)


def test_bad_input_is_one_line(tmp_path):
    assert one_error_line(run_script("what-if.sh", "1", str(tmp_path / "none.yaml")), "what-if") == \
        f"what-if: {tmp_path / 'none.yaml'}: no such scenario"
    line = one_error_line(run_script("what-if.sh", "1", "--schedules", "nosuch", "--out", tmp_path), "what-if")
    assert line.startswith("what-if: --schedules: nosuch: not among this scenario's (")
