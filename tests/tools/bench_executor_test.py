"""scripts/bench-executor.sh and stagecraft_tools.bench_executor: the ideal speed-up and the verdict
worked by hand, and one tiny round (2 steps, a 64-wide MLP, 2 and 4 ranks) whose table adds up."""
import re

from conftest import one_error_line, run_script
from stagecraft_tools import bench_executor


def schedule(sps, ranks=2):
    return {"throughput_samples_per_s": sps, "ranks": ranks, "bubble_fraction": 0.2, "overhead_ns_per_op": 1000.0,
            "per_rank": [{"overhead_ms": 0.5, "wait_ms": 1.0, "transfer_ms": 0.25}] * ranks}


def test_ideal_by_hand():
    assert bench_executor.ideal_sps(100.0, 4) == 160.0  # 100 x 2 x 4 / 5


def test_verdict_at_the_boundary():
    seq = {4: schedule(100.0, 1)}
    lines, failed = bench_executor.pipeline_table([4], seq, {4: schedule(144.0)})  # 144 / 160 = 90%
    assert failed == [] and " 90.0%    PASS " in lines[3]
    assert "1.2/1.2" in lines[3]  # blocked = wait + transfer per rank
    _, failed = bench_executor.pipeline_table([4], seq, {4: schedule(143.0)})
    assert failed == ["M=4 at 89.4%"]


def test_one_tiny_round(tmp_path):
    done = run_script("bench-executor.sh", "--steps", "2", "--repeats", "1", "--oversubscribed", "--set", "model.mlp.hidden=64",
                      "--out", tmp_path, "4")
    assert done.returncode == 0, done.stdout + done.stderr
    seq, ideal, meas, ratio = map(float, re.search(r"^ +4 +([0-9.]+) +([0-9.]+) +([0-9.]+) +([0-9.]+)% ", done.stdout, re.M).groups())
    # Each printed to one decimal: ideal is off by up to 0.05, and seq's 0.05 becomes 0.08 in it;
    # the ratio (also to one decimal) is of the unrounded times.
    assert abs(ideal - seq * 2 * 4 / 5) <= 0.05 + 0.05 * 8 / 5 + 1e-9
    assert abs(ratio - 100 * meas / ideal) <= 0.1
    over = re.search(r"^ +4 +[0-9.]+ +[0-9.]+ +[0-9.]+% +([0-9.]+) +([0-9.]+) ", done.stdout.split("4 ranks on")[1], re.M)
    assert float(over.group(1)) > 0 and float(over.group(2)) > 0  # wall and CPU seconds of the 4-rank run
    assert re.search(r"^VERDICT: (PASS|FAIL): ", done.stdout, re.M)


def test_bad_input_is_one_line():
    assert one_error_line(run_script("bench-executor.sh", "0"), "bench-executor") == \
        "bench-executor: M: expected a positive integer, got '0'"
