"""scripts/plan-check.sh and stagecraft_tools.plan_check: the plan's top three executed at a tiny
size, each measured peak within 2% of its prediction; the order and spread worked by hand."""
import re

from conftest import one_error_line, run_script
from stagecraft_tools import plan_check


def test_order_by_hand():
    assert plan_check.order_line([(1, 10.0, 10.0), (2, 11.0, 12.0)]) == "measured order [1, 2]: agrees with the predicted order"
    # #1 measured 12 against #2's 10: 20% slower; predicted, #2's 11 over #1's 10: the line's "10.0% faster".
    assert plan_check.order_line([(1, 10.0, 12.0), (2, 11.0, 10.0)]) == \
        "measured order [2, 1], predicted [1, 2]: #1 measured 20.0% slower than #2 (predicted 10.0% faster)"


def test_spread_and_peaks_by_hand():
    assert plan_check.spread([100.0, 9.0, 11.0]) == 0.1  # the first step left out: sd 1 over mean 10
    assert plan_check.spread([5.0, 1.0]) == 0.0
    assert plan_check.peak_ratios([{"peak_memory_bytes": 100}], [{"peak_memory_bytes": 103}]) == [0.030000000000000027]


def test_top_three_at_a_tiny_size(tmp_path):
    done = run_script("plan-check.sh", "--global-batch", "64", "--set", "pipeline.steps=3", "--set", "model.mlp.hidden=64",
                      "--set", "pipeline.microbatch_size=8", "--out", tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr  # every measured peak within 2% of its prediction
    rows = re.findall(r"^ ([123])  .* ([0-9.]+) +([0-9.]+) +[+-][0-9.]+% +[0-9.]+%  (.*)$", done.stdout, re.M)
    assert [r[0] for r in rows] == ["1", "2", "3"]
    for *_, peaks in rows:
        assert all(float(p) <= 2.0 for p in re.findall(r"([+-][0-9.]+)%", peaks))
    assert re.search(r"^measured order \[", done.stdout, re.M)
    assert (tmp_path / "best.yaml").is_file()


def test_bad_input_is_one_line(tmp_path):
    assert one_error_line(run_script("plan-check.sh", "--global-batch", "-1", "--out", tmp_path), "plan-check") == \
        "plan-check: --global-batch: expected a positive integer, got '-1'"
