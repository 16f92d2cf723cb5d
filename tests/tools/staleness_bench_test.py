"""scripts/staleness-bench.sh and stagecraft_tools.staleness_bench: the layout of 4 ranks on 2
cores, the findings on hand-made rows, and one tiny run whose table matches its files."""
import json
import re

from conftest import one_error_line, run_script
from stagecraft_tools import staleness_bench as sb

TINY = ["--steps", "6", "--set", "model.transformer.hidden=32", "--set", "model.transformer.seq=16",
        "--set", "pipeline.microbatch_size=2", "--set", "pipeline.microbatches=4", "--set", "training.target_loss=5.4",
        "--set", "training.loss_window=2"]


def test_four_ranks_on_two_cores_share_them():
    assert sb.variant_sets(4, "pipemare", "{correction: true}", 2) == [
        "pipeline.ranks=4", "pipeline.schedule=pipemare", "topology.devices_per_node=2", "pipeline.ranks_per_device=2",
        "training.pipemare={correction: true}"]
    assert sb.variant_sets(2, "1f1b", None, 2)[2:] == ["topology.devices_per_node=2", "pipeline.ranks_per_device=1"]
    assert sb.variant_sets(3, "1f1b", None, 2)[2:] == ["topology.devices_per_node=2", "pipeline.ranks_per_device=2"]


def row(label, peak, step, time_s, last=1.0):
    return {"label": label, "ranks": 2, "samples_per_s": 10.0, "peak_bytes": peak, "reached_step": step,
            "time_s": time_s, "first_loss": 5.0, "last_loss": last, "steps": 20, "target": 2.0, "window": 5}


def test_findings_by_hand():
    rows = [row("pipedream", 2 << 20, 9, 1.0), row("pipemare", 1 << 20, 11, 1.2),
            row("pipemare+resched", 1 << 20, 8, 0.9), row("pipemare+correct", 2 << 20, None, None),
            row("pipemare+both", 2 << 20, 11, 1.3)]
    assert sb.findings(rows) == [
        "2 ranks: PipeMare's peak 1.00 MiB against PipeDream's 2.00 MiB (-50.0%): lower, as the paper reports",
        "2 ranks: pipemare+resched against plain pipemare: better in steps (9 against 12)",
        "2 ranks: pipemare+correct against plain pipemare: worse: it did not reach the target, plain PipeMare did",
        "2 ranks: pipemare+both against plain pipemare: not better in steps (12 against 12)"]
    assert sb.table(rows[:1])[2] == "| 2 | pipedream | 10.0 | 2.00 MiB | 1.00 s | 10 of 20 | 1.0000 |"
    gone = {"label": "pipemare", "ranks": 4, "diverged": "step 9 microbatch 7"}
    assert sb.table([gone])[2] == "| 4 | pipemare | - | - | diverged (step 9 microbatch 7) | - | - |"
    assert sb.findings([gone]) == ["4 ranks: pipemare diverged (step 9 microbatch 7)"]
    both = dict(row("pipemare+both", 1 << 20, None, None), ranks=4)
    rose = dict(row("pipemare+correct", 1 << 20, None, None, last=1e9), ranks=4)
    assert sb.findings([gone, both, rose])[1:] == [
        "4 ranks: pipemare+correct against plain pipemare: no better: its loss rose to 1e+09 (plain PipeMare diverged)",
        "4 ranks: pipemare+both against plain pipemare: better: it trained (loss 5 to 1) where plain PipeMare diverged"]


def test_a_diverged_run_is_read_from_its_log(tmp_path):
    log = tmp_path / "x.log"
    log.write_text("stagecraft: error: rank 3 (vm): step 9 microbatch 7: loss is -nan; training diverged (lower training.lr)\n")
    assert sb.diverged_row("pipedream", 4, log) == {"label": "pipedream", "ranks": 4, "diverged": "step 9 microbatch 7"}
    log.write_text("stagecraft: error: something else\n")
    assert sb.diverged_row("pipedream", 4, log) is None


def test_a_tiny_run_reports_its_files(tmp_path):
    done = run_script("staleness-bench.sh", "--ranks", "2", "--variants", "1f1b,pipemare+both", "--out", tmp_path, *TINY,
                      timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    for label in ("1f1b", "pipemare+both"):
        s = json.loads((tmp_path / f"{label}.2.json").read_text())["schedules"][0]
        line = re.search(rf"^\| 2 \| {re.escape(label)} \| ([0-9.]+) \| ([0-9.]+) MiB \| ([^|]+) \|", done.stdout, re.M)
        assert line, done.stdout
        assert abs(float(line.group(1)) - s["throughput_samples_per_s"]) < 0.06
        assert abs(float(line.group(2)) - max(r["peak_memory_bytes"] for r in s["per_rank"]) / 2**20) < 0.006
        reached = line.group(3).strip()
        assert (reached == "not reached") == (s["time_to_target_ms"] is None)
    assert (tmp_path / "report.md").read_text().splitlines()[0] == "target: training loss 5.4 (mean of 2 steps)"


def test_bad_input_is_one_line(tmp_path):
    line = one_error_line(run_script("staleness-bench.sh", str(tmp_path / "none.yaml")), "staleness-bench")
    assert line == f"staleness-bench: {tmp_path / 'none.yaml'}: no such scenario"
    line = one_error_line(run_script("staleness-bench.sh", "--variants", "nosuch"), "staleness-bench")
    assert line.startswith("staleness-bench: --variants: nosuch: not among gpipe, 1f1b,")
