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
