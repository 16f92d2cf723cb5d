"""stagecraft_tools.gemm_sustain: the burst and sustained rates by hand, the GEMM's FLOPs, and a probe
of no window as one error (scripts/gemm-sustain.sh end to end is tests/cli/gemm_sustain_cli.sh)."""
import pytest

from stagecraft_tools import common, gemm_sustain


def windows(*rates):
    return [{"tflops": r} for r in rates]


def test_burst_is_the_first_window_and_sustained_the_median_of_the_last_half():
    # Five windows: the last half is the last three (5 // 2 = 2 left out): median of 600, 590, 620.
    assert gemm_sustain.summary(windows(700, 650, 600, 590, 620)) == (700, 600, 600 / 700)
    # Four: the last two, their mean as the median.
    assert gemm_sustain.summary(windows(800, 700, 640, 660)) == (800, 650, 650 / 800)
    # One window is both.
    assert gemm_sustain.summary(windows(500)) == (500, 500, 1.0)


def test_a_probe_of_no_window_is_an_error():
    with pytest.raises(common.ToolError, match="timed no window"):
        gemm_sustain.summary([])


def test_the_fc_gemm_flops():
    # [8192, 4096] x [4096, 16384]: 2 x 8192 x 16384 x 4096 = 1.0995e12.
    assert gemm_sustain.flops(8192, 4096) == 2 * 8192 * 16384 * 4096
