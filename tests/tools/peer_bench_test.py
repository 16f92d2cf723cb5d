"""scripts/bench-vs-torch.sh and stagecraft_tools.peer_bench without PyTorch: the report's arithmetic
on hand-made runs, the profile and scenario read as their files state them, section 4 (every
schedule against its ideal) at a tiny size, and the PyTorch sections skipped with a note."""
import re

from conftest import ROOT, one_error_line, run_script
from stagecraft_tools import common, peer_bench


def test_report_by_hand():
    runs = [{"schedules": [{"schedule": "1f1b", "throughput_samples_per_s": v}]} for v in (90.0, 110.0, 100.0)]
    assert peer_bench.stats([3.0, 1.0, 2.0]) == (2.0, "1.0..3.0")
    assert peer_bench.report("peer", 50.0, runs) == ["stagecraft 1f1b              100.0  (90.0..110.0)  2.00x peer"]


def test_profile_and_scenario_as_written():
    profile = {"layers": [{"forward": "3000ns", "backward_input": "2000ns", "backward_weight": "1000ns"},
                          {"forward": "5000ns", "backward_input": "4000ns", "backward_weight": "3000ns"},
                          {"forward": "4000ns", "backward_input": "9000ns", "backward_weight": "2000ns"}]}
    assert peer_bench.layer_medians(profile) == (4.0, 4.0, 2.0)
    # scenarios/gpt-tiny-cpu.yaml: 4 layers, hidden 256, 4 heads, seq 128, vocab 4096; 8 microbatches of 2.
    assert peer_bench.gpt_shape(common.read_yaml(ROOT / "scenarios" / "gpt-tiny-cpu.yaml")) == (4, 256, 4, 128, 4096, 2, 8)


def test_ideal_by_hand():
    measured = {"throughput_samples_per_s": 90.0, "step_time_ms": 10.0, "step_ms": [12.0, 8.0, 9.0]}
    (line,) = peer_bench.ideal_report(["1f1b"], {"1f1b": [(measured, 95.0, 105.0)]})[3:]
    # Of the ideal (95 + 105) / 2 = 100: 90%; by the median step 9: 90 x 10 / 9 = 100%; drift 105 / 95 - 1 = +10.5%.
    assert re.match(r"1f1b +90\.0% +\(90\.0\.\.90\.0\) +100\.0% .* 90\.0; \+10\.5%$", line), line


def test_ideal_section_at_a_tiny_size():
    done = run_script("bench-vs-torch.sh", "1", "--ideal", "--set", "pipeline.microbatches=4", "--set", "model.mlp.hidden=64",
                      "--set", "pipeline.schedule=[1f1b,zb-h1]", "--ideal-steps", "3", "--profile-repeats", "3")
    assert done.returncode == 0, done.stdout + done.stderr
    rows = re.findall(r"^(1f1b|zb-h1) +([0-9.]+)% ", done.stdout, re.M)
    assert [r[0] for r in rows] == ["1f1b", "zb-h1"] and all(float(v) > 0 for _, v in rows)


def test_without_torch_the_sections_say_so():
    if peer_bench.have_torch():
        return  # with PyTorch the sections run (torch_peer_test.py)
    done = run_script("bench-vs-torch.sh", "1", "--gpt")
    assert done.returncode == 0 and done.stdout.startswith("SKIPPED: gpt: needs PyTorch"), done.stdout + done.stderr


def test_bad_input_is_one_line():
    assert one_error_line(run_script("bench-vs-torch.sh", "0"), "bench-vs-torch") == \
        "bench-vs-torch: REPEATS: expected a positive integer, got '0'"


def test_fixtures_without_torch_is_one_line():
    if peer_bench.have_torch():
        return  # regenerated in torch_test.py
    assert one_error_line(run_script("gen-gpt-fixtures.sh"), "gen-gpt-fixtures").startswith(
        "gen-gpt-fixtures: needs PyTorch (")
