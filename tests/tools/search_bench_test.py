"""scripts/search-bench.sh and stagecraft_tools.search_bench: the search against Table 5's
automatic scheduler (one model, a short budget), uneven stages, the CPU executor at a tiny size,
and the report's arithmetic by hand."""
import re

from conftest import one_error_line, run_script
from stagecraft_tools import search_bench


def run(span_ms, makespan_ms, name, oom=False):
    return {"schedule": name, "makespan_ms": makespan_ms, "oom": oom, "per_rank": [{"span_ms": span_ms}]}


def test_best_hand_by_hand():
    schedules = [run(9, 12, "a"), run(8, 14, "b"), run(1, 1, "c", oom=True)]
    assert search_bench.best_hand(schedules, 1) == (12, "a")  # one step: the makespan; c does not fit
    assert search_bench.best_hand(schedules, 1000) == ((14 + 999 * 8) / 1000, "b")


def test_ratios_and_verdicts():
    # Ratios 2, 3, 2, 1, sorted 1, 2, 2, 3: median 2, quartiles at index 1 and 3: 2 and 3; range 1..3.
    assert search_bench.ratios([2, 3, 4, 5], [1, 1, 2, 5]) == (2.0, 2.0, 3.0, 1.0, 3.0)
    assert search_bench.verdict(6, 9) == "target met"
    assert search_bench.verdict(2, 3) == "target not met (and out of reach of any order)"
    assert search_bench.target_line(False, "zb-v", 0.99, 0.98).startswith("target (at or above) not resolved")
    assert search_bench.target_line(False, "zb-v", 0.97, 0.98) == "target (at or above) not met"


def test_table_5_and_uneven_stages(tmp_path):
    done = run_script("search-bench.sh", "0.2", "1", "--parts", "12", "--models", "1.5B", "--out", tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    rows = re.findall(r"^ +1\.5B +8 +(\d+) +([0-9.]+) +([0-9.]+) +\S+ +([0-9.]+) +([0-9.]+) +\S+$", done.stdout, re.M)
    assert [r[0] for r in rows] == ["24", "32", "64"]
    for _, zb1, s1, zb2, s2 in rows:  # the search starts from the best generator: never worse
        assert float(s1) <= float(zb1) + 1e-4 and float(s2) <= float(zb2) + 1e-4
    assert "met on every setting" in done.stdout
    assert len(re.findall(r"no order of the generators' placements can beat", done.stdout)) == 4


def test_executor_part_at_a_tiny_size(tmp_path):
    done = run_script("search-bench.sh", "0.1", "1", "--parts", "3", "--set", "pipeline.steps=2",
                      "--set", "pipeline.microbatches=4", "--set", "model.mlp.hidden=128", "--out", tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    medians = re.findall(r"^ +(\S+): median +([0-9.]+) samples/s", done.stdout, re.M)
    assert {name for name, _ in medians} == set(search_bench.HAND) | {"searched"}
    assert all(float(v) > 0 for _, v in medians)
    assert re.search(r"control +/ \S+: median [0-9.]+", done.stdout)
    assert re.search(r"target \(at or above\)", done.stdout)


def test_bad_input_is_one_line():
    assert one_error_line(run_script("search-bench.sh", "0"), "search-bench") == \
        "search-bench: BUDGET_S: expected a positive number of seconds, got '0'"
    assert one_error_line(run_script("search-bench.sh", "1", "1", "--parts", "5"), "search-bench") == \
        "search-bench: --parts 5: expected digits of 1234"
