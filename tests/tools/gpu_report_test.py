"""stagecraft_tools.gpu_report (scripts/gpu-check.sh's report) on a recorded run: the steps of
docs/gpu-runs/2026-11-26-h200.md (tests/tools/data/h200_2026-11-26_steps.tsv) come back as that
report's rows, and the closing count is the rows' own; a missing folder is one line."""
import json
import shutil
from pathlib import Path

from conftest import ROOT, one_error_line, run_script

DATA = Path(__file__).resolve().parent / "data"


def recorded_rows(names):
    """The recorded report's rows of these steps: (name, result, time, detail)."""
    out = {}
    for line in (ROOT / "docs" / "gpu-runs" / "2026-11-26-h200.md").read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("| ") and len(cells) == 4 and cells[0] in names:
            out[cells[0]] = tuple(cells)
    return out


def test_recorded_steps(tmp_path):
    shutil.copy(DATA / "h200_2026-11-26_steps.tsv", tmp_path / "steps.tsv")
    done = run_script("tool.sh", "gpu_report", tmp_path)
    names = [l.split("\t")[0] for l in (tmp_path / "steps.tsv").read_text().splitlines() if not l.startswith("#")]
    assert len(names) == 28
    report = (tmp_path / "report.md").read_text().splitlines()
    got = {}
    for line in report:
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("| ") and len(cells) == 4 and cells[0] in names:
            got[cells[0]] = tuple(cells)
    assert got == recorded_rows(names)
    summary = json.loads((tmp_path / "summary.json").read_text())
    results = [r["result"] for r in summary["rows"]]
    assert (summary["passed"], summary["failed"]) == (results.count("pass"), results.count("fail"))
    assert report[-1] == f"{summary['passed']} passed, {summary['failed']} failed" == done.stdout.strip()
    assert done.returncode == (1 if summary["failed"] else 0)


def test_missing_folder_is_one_line(tmp_path):
    assert one_error_line(run_script("tool.sh", "gpu_report", tmp_path / "none"), "gpu_report") == \
        f"gpu_report: {tmp_path / 'none'}: no such report folder"


def test_a_case_that_needs_a_gpu_per_rank_is_no_failure_to_use_the_gpu(tmp_path):
    # As on 2026-11-30's H200 (docs/gpu-runs/2026-11-30-h200.md): the NCCL cases need a GPU per
    # rank and skip on one GPU, saying so; any other skip on a usable GPU still fails the check.
    case = ('<testcase name="{0}" status="{1}">{2}<system-out>{3}</system-out></testcase>')
    def report(*cases):
        (tmp_path / "ctest-gpu.xml").write_text("<testsuite>" + "".join(case.format(*c) for c in cases) + "</testsuite>")
        (tmp_path / "steps.tsv").write_text("devices\tpass\t0\t1 GPU(s)\tlogs/devices.log\n")
        run_script("tool.sh", "gpu_report", tmp_path)
        return (tmp_path / "report.md").read_text()
    skip = '<skipped message="SKIP_RETURN_CODE=77" />'
    text = report(("a.pass", "run", "", "ok"),
                  ("exec.mpi_gpu_nccl", "notrun", skip,
                   "SKIPPED: the NCCL cases need a GPU per rank and NCCL: 4 ranks, 1 GPU(s) (exec_mpi_gpu_tests)"))
    assert "| no gpu test skipped on a usable GPU | PASS |  | 1 run; 1 need a GPU per rank: exec.mpi_gpu_nccl |" in text, text
    assert "1 passed, 0 failed, 1 skipped" in text and "- skipped, needs a GPU per rank: exec.mpi_gpu_nccl" in text
    text = report(("a.pass", "run", "", "ok"), ("b.gone", "notrun", skip, "SKIPPED: no CUDA device was found"))
    assert "| no gpu test skipped on a usable GPU | FAIL |  | 1 skipped: b.gone |" in text, text


def test_device_file_of_a_cuda_name():
    from stagecraft_tools.block import device_file_for
    assert device_file_for("NVIDIA H200") == "H200"
    assert device_file_for("NVIDIA H100 80GB HBM3") == "H100-SXM"
    assert device_file_for("NVIDIA A100-SXM4-80GB") == "A100-SXM-80GB"
    assert device_file_for("NVIDIA L40S") == "L40S"
    assert device_file_for("NVIDIA H100 PCIe") is None          # the library holds the SXM card's peaks
    assert device_file_for("NVIDIA GeForce RTX 4090") is None


def test_each_schedule_states_its_model_flops_and_their_share_of_the_dense_peak(tmp_path):
    """A run on an H200 in tf32: 49.47 model TFLOP/s per GPU is 10.0% of the datasheet's dense tf32
    494.7 TFLOP/s (scenarios/devices/H200.yaml); a schedule without the field shows none."""
    (tmp_path / "steps.tsv").write_text("gpt-gpu: execute\tpass\t30\t\t\n")
    run = tmp_path / "gpt-gpu"
    run.mkdir()
    step = {"predicted": 100.0, "measured": 110.0, "error_pct": -9.1}
    bubble = {"predicted": 0.1, "measured": 0.12}
    (run / "compare.json").write_text(json.dumps({"schedules": [
        {"schedule": s, "step_time_ms": step, "bubble_fraction": bubble} for s in ("1f1b", "gpipe")]}))
    (run / "measured.json").write_text(json.dumps({
        "scenario": "gpt-gpu", "source": "measured", "backend": "cuda:0 (NVIDIA H200)", "precision": "tf32",
        "schedules": [{"schedule": "1f1b", "model_tflops_per_device": 49.47}, {"schedule": "gpipe"}]}))
    run_script("tool.sh", "gpu_report", tmp_path)
    report = (tmp_path / "report.md").read_text()
    assert "NVIDIA H200's dense tf32 peak, 494.7 TFLOP/s" in report
    rows = {cells[0]: cells for cells in ([c.strip() for c in line.strip().strip("|").split("|")]
                                          for line in report.splitlines() if line.startswith("| "))}
    assert rows["1f1b"][-2:] == ["49.47", "10.0%"]
    assert rows["gpipe"][-2:] == ["-", "-"]
    # Another precision's peak, or a GPU the library lacks: the FLOPs stay, the share is not guessed.
    (run / "measured.json").write_text(json.dumps({
        "backend": "cuda:0 (NVIDIA GeForce RTX 4090)", "precision": "tf32",
        "schedules": [{"schedule": "1f1b", "model_tflops_per_device": 49.47}]}))
    run_script("tool.sh", "gpu_report", tmp_path)
    report = (tmp_path / "report.md").read_text()
    assert "no dense peak known for NVIDIA GeForce RTX 4090 in tf32" in report
    assert [l for l in report.splitlines() if l.startswith("| 1f1b |")][0].endswith("| 49.47 | - |")


def test_the_pytorch_peers_table_is_in_the_report(tmp_path):
    (tmp_path / "steps.tsv").write_text("PyTorch peer\tpass\t200\t\tlogs/PyTorch_peer.log\n")
    (tmp_path / "logs").mkdir()
    table = "stagecraft                              160.0  (160.0..160.0)\nverdict: NOT MET: stagecraft at 0.80x"
    (tmp_path / "logs" / "PyTorch_peer.log").write_text(table + "\n")
    run_script("tool.sh", "gpu_report", tmp_path)
    report = (tmp_path / "report.md").read_text()
    assert "## gpt-gpu on one rank beside PyTorch (eager, torch.compile)\n\n```\n" + table + "\n```\n" in report


def test_kernels_are_judged_against_the_memory_bandwidth_but_the_column_sums(tmp_path):
    """BM_KernelBandwidth's runs: the worst judged kernel (gelu_backward, 0.65) fails the 0.7
    target; bias_grad's 0.30 is shown, not judged."""
    (tmp_path / "steps.tsv").write_text("cuda_bench\tpass\t90\t\t\n")
    runs = [{"name": f"BM_KernelBandwidth/kernel:{k}/manual_time", "run_type": "iteration", "label": label,
             "GB_per_s": 4800 * of_peak, "of_peak": of_peak}
            for k, (label, of_peak) in enumerate([("layernorm", 0.82), ("bias_grad", 0.30), ("gelu_backward", 0.65)])]
    (tmp_path / "cuda_bench.json").write_text(json.dumps({"benchmarks": runs}))
    run_script("tool.sh", "gpu_report", tmp_path)
    report = (tmp_path / "report.md").read_text()
    assert "| layernorm | 3936 | 0.82 |" in report and "| bias_grad | 1440 | 0.30 |" in report
    summary = json.loads((tmp_path / "summary.json").read_text())
    row = [r for r in summary["rows"] if r["name"].startswith("element-wise and row kernels")]
    assert [(r["result"], r["detail"]) for r in row] == [("fail", "worst gelu_backward: 0.65")]


def test_step_graphs_are_judged_on_the_gpus_idle_time_per_op(tmp_path):
    """BM_StepGraphs' two runs in a table; the run with graphs (2.4 us idle per op) fails the 2 us
    target; the run issued call by call is shown, not judged."""
    (tmp_path / "steps.tsv").write_text("cuda_bench\tpass\t90\t\t\n")
    runs = [{"name": f"BM_StepGraphs/graphs:{g}/iterations:1/manual_time", "run_type": "iteration",
             "gpu_idle_us_per_op": idle, "gpu_idle_us_per_pass": idle / 2, "host_us_per_op": host,
             "step_ms": 90.0, "samples_per_s": 177.8} for g, idle, host in [(0, 14.0, 30.0), (1, 2.4, 1.5)]]
    (tmp_path / "cuda_bench.json").write_text(json.dumps({"benchmarks": runs}))
    run_script("tool.sh", "gpu_report", tmp_path)
    report = (tmp_path / "report.md").read_text()
    assert "| call by call | 14.00 | 7.00 | 30.00 | 90.0 | 177.8 |" in report
    assert "| step graphs | 2.40 | 1.20 | 1.50 | 90.0 | 177.8 |" in report
    summary = json.loads((tmp_path / "summary.json").read_text())
    row = [r for r in summary["rows"] if r["name"].startswith("GPU idle at most 2 us per op")]
    assert [(r["result"], r["detail"]) for r in row] == [("fail", "2.40 us")]


def test_a_run_with_step_graphs_is_held_against_the_run_issued_call_by_call(tmp_path):
    """measured-graphs.json's 1F1B against measured.json's: the same losses to 1e-3 pass, with the
    later steps' mean times in the detail (steps 2-3: 11 and 13 ms); a loss off by 1% fails,
    naming the step."""
    (tmp_path / "steps.tsv").write_text("")
    run = tmp_path / "gpt-gpu-1rank"
    run.mkdir()
    record = lambda losses, step_ms, overhead: json.dumps({"schedules": [
        {"schedule": "1f1b", "losses": losses, "step_ms": step_ms, "overhead_ns_per_op": overhead}]})
    (run / "measured.json").write_text(record([10.0, 9.0, 8.0, 7.0], [30, 20, 13, 13], 14000.0))
    (run / "measured-graphs.json").write_text(record([10.0, 9.0, 8.0, 7.0005], [30, 25, 11, 11], 1500.0))
    run_script("tool.sh", "gpu_report", tmp_path)
    rows = {r["name"]: r for r in json.loads((tmp_path / "summary.json").read_text())["rows"]}
    row = rows["gpt-gpu-1rank: 1f1b with step graphs trains as issued call by call"]
    assert row["result"] == "pass"
    assert row["detail"] == ("4 steps within 0.001; steps from 2: 11.00 ms with graphs, 13.00 ms call by call; "
                             "overhead 1.50 and 14.00 us per op")
    (run / "measured-graphs.json").write_text(record([10.0, 9.0, 8.08, 7.0], [30, 25, 11, 11], 1500.0))
    run_script("tool.sh", "gpu_report", tmp_path)
    rows = {r["name"]: r for r in json.loads((tmp_path / "summary.json").read_text())["rows"]}
    row = rows["gpt-gpu-1rank: 1f1b with step graphs trains as issued call by call"]
    assert (row["result"], row["detail"]) == ("fail", "step 2: 8.08, call by call 8")
