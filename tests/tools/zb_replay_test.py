"""scripts/zb-paper-replay.sh and stagecraft_tools.zb_replay: the Zero Bubble paper's Table 5
replayed, against the paper's own numbers (data/zero_bubble_paper.csv) and hand-worked rates."""
from conftest import one_error_line, run_script
from stagecraft_tools import common, zb_replay


def test_bubble_rate_by_hand():
    # Two ranks, spans 10 and 8 ms, ideal 7.5 ms: cost 10, rate (10 - 7.5) / 10.
    schedule = {"per_rank": [{"span_ms": 10.0}, {"span_ms": 8.0}], "makespan_ms": 11.0}
    assert common.paper_bubble_rate(schedule, 7.5) == 0.25
    # A 3-step run: the first step's makespan, then the largest span per step: (11 + 2 * 10) / 3.
    assert abs(common.long_run_step_ms(schedule, 3) - 31 / 3) < 1e-12


def test_1f1b_closed_form():
    # Equal costs, no transfer time: 1F1B's bubble is (p - 1) / (m + p - 1) (GPipe's formula).
    s = zb_replay.Setting("x", 4, 8, 1.0, 1.0, 1.0, 0.0, 1, (0, 0, 0, 0), 0)
    assert abs(zb_replay.rates(s, ["1f1b"])["1f1b"] - 3 / 11) < 1e-6


def test_settings_are_table_9():
    s = zb_replay.settings()
    assert len(s) == 12
    first = s[0]  # Table 9's first row: 1.5B, p 8, m 24, F 18522 us, B 18086, W 9337, comm 601
    assert (first.model, first.p, first.m, first.f, first.b, first.w, first.comm) == ("1.5B", 8, 24, 18.522, 18.086, 9.337, 0.601)
    assert first.paper[0] == 0.2431  # Table 5: 1F1B's bubble rate


def test_script_matches_the_paper():
    done = run_script("zb-paper-replay.sh")
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert sum(1 for l in lines if l.split()[:1] and l.split()[0] in ("1.5B", "6.2B", "14.6B", "28.3B")) == 24
    worst = dict(kv.split() for kv in lines[lines.index(next(l for l in lines if l.startswith("largest |sim - paper|")))]
                 .split(": ", 1)[1].split(", "))
    assert set(worst) == {"1f1b", "interleaved", "zb-h1", "zb-h2"} and max(map(float, worst.values())) <= 1e-4
    assert "MISMATCH" not in done.stdout


def test_report_flags_a_mismatch():
    s = zb_replay.settings()[0]
    got = {"1f1b": s.paper[0] + 0.01, "interleaved": s.paper[1], "zb-h1": s.paper[2], "zb-h2": s.paper[3],
           "zb-1p": 0.1585, "zb-2p": 0.0433}
    lines, bad = zb_replay.report([(s, got, {"zb_1p": "0.1585", "zb_2p": "0.0433"})])
    assert bad == ["1f1b"] and lines[-1] == "MISMATCH: 1f1b"


def test_bad_model_is_one_line():
    done = run_script("zb-paper-replay.sh", "--models", "9B")
    assert done.returncode == 2
    assert one_error_line(done, "zb-paper-replay").endswith("no such model 9B (Table 5 has 1.5B, 14.6B, 28.3B, 6.2B)")


def test_unknown_flag_is_one_line():
    done = run_script("zb-paper-replay.sh", "--bogus")
    assert done.returncode == 2
    assert one_error_line(done, "zb-paper-replay") == "zb-paper-replay: unrecognized arguments: --bogus"
