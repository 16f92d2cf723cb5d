"""scripts/plan-megatron.sh and stagecraft_tools.plan_megatron: the plan against Megatron-LM's own
layouts (SC'21 Table 1), a row planned for real, and the report's parts worked by hand."""
import re

from conftest import one_error_line, run_script
from stagecraft_tools import plan_megatron

PAPER = {"schedule": "1f1b", "ranks": 2, "data_parallel": 32, "tensor_parallel": 8, "microbatch_size": 4,
         "microbatches": 12, "chunks": 1, "zero": 0, "partition": "even"}


def test_describe_and_differences():
    assert plan_megatron.describe(PAPER) == "1f1b P2 D32 T8 b4 m12 v1 zero0 even"
    best = dict(PAPER, tensor_parallel=4, data_parallel=64)
    assert plan_megatron.differences(PAPER, best) == ["D 32->64", "T 8->4"]


def test_first_row_plans_at_least_as_fast_as_the_paper():
    done = run_script("plan-megatron.sh", "--rows", "1")
    assert done.returncode == 0, done.stdout + done.stderr
    row = next(l for l in done.stdout.splitlines() if l.strip().startswith("1.7B"))
    # The paper's layout for 1.7B on 32 GPUs: t 1, p 1, so D 32; batch 512 of 16: m 1.
    assert "1f1b P1 D32 T1 b16 m1 v1 zero0 even" in row
    ratio = float(re.search(r" ([0-9.]+)x  yes ", row).group(1))
    assert ratio >= 1.0
    assert done.stdout.rstrip().endswith("the plan is at least as fast as the paper on every row")


def test_bad_rows_are_one_line():
    assert one_error_line(run_script("plan-megatron.sh", "--rows", "0,2"), "plan-megatron") == \
        "plan-megatron: --rows 0,2: expected row numbers 1..10, comma-separated"
    line = one_error_line(run_script("plan-megatron.sh", "--rows", "1", "--no-such-flag"), "plan-megatron")
    assert "unknown option '--no-such-flag'" in line
