"""scripts/accuracy.sh and stagecraft_tools.accuracy: the report's statistics on hand-made compare
files, and the whole benchmark at a tiny size (one run, a 64-wide MLP, two schedules), whose two
layouts must train alike (DESIGN.md §9)."""
import re

from conftest import one_error_line, run_script
from stagecraft_tools import accuracy

TINY = ["--set", "pipeline.steps=2", "--set", "pipeline.microbatches=4", "--set", "model.mlp.hidden=64",
        "--set", "pipeline.microbatch_size=8", "--set", "pipeline.schedule=[1f1b,zb-h1]"]


def compare_schedule(name, predicted, measured, median=None):
    return {"schedule": name, "step_time_ms": {"predicted": predicted, "measured": measured,
                                               "error_pct": 100 * (predicted / measured - 1)},
            "bubble_fraction": {"error_pp": 1.0}, "per_rank": [{"peak_memory_bytes": {"error_pct": -3.0}},
                                                               {"peak_memory_bytes": {"error_pct": 2.0}}],
            "measured_step_spread": {"median_ms": median, "spread_pct": 4.0} if median else {},
            "cost_drift_pct": 1.5, "model_error_pct": 0.5, "model_bubble_error_pp": 0.2}


def test_rows_by_hand():
    (row,) = accuracy.rows_of("main", 1, {"schedules": [compare_schedule("1f1b", 11.0, 10.0, median=8.0)]})
    assert abs(row.step_err - 10.0) < 1e-9 and row.mem_err == 3.0  # the worst rank's |error|
    assert row.vs_median == 100 * (11 - 8) / 8  # against the median measured step: +37.5%
    assert row.spread == 4.0 and row.model == 0.5


def test_noise_and_summary_by_hand():
    rows = [accuracy.Row("main", k, "1f1b", err, 0.5, 1.0, 2.0, measured, None, None, None, None)
            for k, err, measured in ((1, 1.0, 10.0), (2, -3.0, 12.0), (3, 2.0, 11.0))]
    # One schedule measured 10, 12, 11: (12 - 10) / 11 = 18.18%.
    assert abs(accuracy.run_to_run(rows) - 200 / 11) < 1e-9
    line = accuracy.summary("main", rows, accuracy.run_to_run(rows))
    # |errors| 1, 3, 2: median 2.0, largest 3.0.
    assert re.match(r"main +2\.0% +3\.0% +0\.5 pp +1\.0% +2\.0% +18\.2%", line), line


def test_without_stash_and_losses():
    text = "ranks:\n  - {forward: 1ns}\n    stash: {a: 1}\n  - {forward: 2ns}\n"
    assert accuracy.without_stash(text) == "ranks:\n  - {forward: 1ns}\n  - {forward: 2ns}\n"
    assert accuracy.loss_difference([1.0, 2.0], [1.0, 2.5]) == 0.2


def test_benchmark_at_a_tiny_size(tmp_path):
    done = run_script("accuracy.sh", "1", "--out", tmp_path, *TINY)
    assert done.returncode == 0, done.stdout + done.stderr
    text = done.stdout
    table = re.findall(r"^(main|hidden1024) +1 (1f1b|zb-h1) +([+-][0-9.]+)%", text, re.M)
    assert len(table) == 4
    # The "all" line's median |step error| is the table's own.
    errors = sorted(abs(float(e)) for *_, e in table)
    median = float(re.search(r"^all +([0-9.]+)%", text, re.M).group(1))
    assert abs(median - (errors[1] + errors[2]) / 2) <= 0.1
    assert "the stash's share" in text and re.search(r"^  zb-h1 [+-][0-9.]+ / [+-][0-9.]+$", text, re.M)
    # The replicas and the pipeline train alike (DESIGN.md §9: within 1e-5).
    worst = float(re.search(r"largest relative loss difference (\S+) ", text).group(1))
    assert worst <= 1e-5
    losses = re.findall(r"^P=\S+ x D=\S+, microbatch \S+ +[0-9.]+ ms +[0-9.]+ ms +[+-][0-9.]+%  (.*)$", text, re.M)
    assert len(losses) == 2 and losses[0] and len(losses[0].split()) == 2  # one loss per step


def test_bad_input_is_one_line(tmp_path):
    assert one_error_line(run_script("accuracy.sh", "x"), "accuracy") == "accuracy: RUNS: expected a positive integer, got 'x'"
    line = one_error_line(run_script("accuracy.sh", "1", "--set", "pipeline.nosuch=1", "--out", tmp_path), "accuracy")
    assert "nosuch" in line
    assert not any(tmp_path.iterdir())  # nothing written
