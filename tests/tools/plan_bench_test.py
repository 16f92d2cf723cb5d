"""scripts/plan-bench.sh and stagecraft_tools.plan_bench: the plan's counts from its --json and the
timing verdict, on the planner's hand-worked scenario (tests/data/plan-tiny.yaml), not the 1T GPT."""
import json
import re
import subprocess

from conftest import ROOT, one_error_line, run_script
from stagecraft_tools import common, plan_bench

TINY = ROOT / "tests" / "data" / "plan-tiny.yaml"


def test_counts_and_verdict_by_hand():
    plan = {"enumerated": 10, "layouts": 2, "rejected": {"topology": 0, "schedule shape": 3}, "simulated": 7,
            "seconds": 1.25, "threads": 2}
    assert plan_bench.counts(plan) == ["configurations enumerated: 10 over 2 layouts", "rejected: 3 schedule shape",
                                       "simulated: 7 in 1.2 s on 2 threads"]
    assert plan_bench.verdict(59.9, 2) == ("plan on 2 cores: 59.9 s wall (target < 60 s): ok", True)
    assert plan_bench.verdict(60.0, 2)[1] is False


def test_tiny_plan(tmp_path):
    done = run_script("plan-bench.sh", "--scenario", TINY, "--gpus", "4", "--global-batch", "16")
    assert done.returncode == 0, done.stdout + done.stderr
    enumerated, layouts = map(int, re.search(r"^configurations enumerated: (\d+) over (\d+) layouts$", done.stdout, re.M).groups())
    # The same plan by the command itself: the same counts.
    subprocess.run([common.cli(), "plan", TINY, "--gpus", "4", "--global-batch", "16", "--json", tmp_path / "p.json"],
                   check=True, capture_output=True)
    plan = json.loads((tmp_path / "p.json").read_text())
    assert (enumerated, layouts) == (plan["enumerated"], plan["layouts"])
    assert re.search(r"^plan on \d+ cores: [0-9.]+ s wall \(target < 60 s\): ok$", done.stdout, re.M)


def test_bad_input_is_one_line():
    assert one_error_line(run_script("plan-bench.sh", "--gpus", "0"), "plan-bench") == \
        "plan-bench: --gpus: expected a positive integer, got '0'"
