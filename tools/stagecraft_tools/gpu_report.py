"""The report of scripts/gpu-check.sh, from what its steps left in the report folder.

Reads OUT/steps.tsv (one line per step: name, pass|fail|skip, seconds, detail, log) and the
files the steps wrote (devices.json, ctest-gpu.xml, exec-mpi-gpu.xml, <run>/compare.json and
<run>/measured.json, cuda_bench.json, nccl_p2p_bench.json, layer-probe.md), derives the checks
the numbers allow (no gpu test skipped, every schedule measured, the flush schedules' losses
alike, cuda_bench's targets, the NcclTransport against raw NCCL; exec_mpi_gpu_tests' skipped
cases as skipped rows), and writes OUT/report.md and OUT/summary.json. Prints the closing line
"N passed, M failed" and exits 1 when M > 0.

Usage: scripts/tool.sh gpu_report OUT
"""
import datetime
import functools
import json
import os
import re
import socket
import xml.etree.ElementTree as ET

from . import block
from .common import ToolError, cli, entry, usage_error

# cuda_bench's targets (tests/bench/cuda_bench.cpp, docs/executor.md, "GPU executor").
OF_CUBLAS_TARGET = 0.9  # issue 57, with the fused linear layers (0.6 before them)
# cuda_bench's BM_KernelBandwidth: the element-wise and row kernels at least this share of the
# GPU's memory bandwidth (issue 57); the column sums (bias_grad, layernorm_backward_weight) shown
# beside them, not judged.
OF_PEAK_TARGET = 0.7
COLUMN_KERNELS = ("bias_grad", "layernorm_backward_weight")
US_PER_OP_TARGET = 10.0
# cuda_bench's BM_StepGraphs: the device's idle time between ops in the replayed steps at gpt-gpu's
# shape, with step graphs (issue 57, point 3).
GRAPH_IDLE_US_TARGET = 2.0
OPS = {0: "F", 1: "I", 2: "W"}                                   # cuda_bench's LayerOp
PRECISIONS = {0: "fp32", 1: "tf32", 2: "bf16", 3: "fp16"}       # exec/cuda_plan.h GemmPrecision
PATHS = {0: "raw NCCL", 1: "NcclTransport", 2: "host-staged"}   # nccl_p2p_bench's Path
# The NcclTransport's point-to-point bandwidth at least this share of raw NCCL's (issue 52: within
# 10%), judged at the largest message, where the bandwidth is not the latency's.
OF_RAW_NCCL_TARGET = 0.9
# The schedules whose step t reads the weights of step t (docs/schedules.md, the "flush" rows): the
# same math in another order, so the same losses. A record whose stages carry
# weight_delay_forward and weight_delay_backward (DESIGN.md §10) is judged by them instead.
FLUSH_SCHEDULES = ("gpipe", "1f1b", "interleaved", "interleaved-overlap", "zb-h1", "zb-h2", "zb-v", "dualpipe-v", "zb-1p",
                   "zb-2p", "zb-auto")
LOSS_RTOL = 1e-3  # as tests/cli/execute_gpu_cli.sh allows them: summation order and TF32 rounding


def load_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def read_steps(out):
    steps = []
    with open(os.path.join(out, "steps.tsv")) as f:
        for line in f:
            fields = line.rstrip("\n").split("\t")
            if len(fields) < 3 or fields[1] not in ("pass", "fail", "skip"):
                continue
            fields += [""] * (5 - len(fields))
            steps.append({"name": fields[0], "status": fields[1], "seconds": float(fields[2] or 0),
                          "detail": fields[3], "log": fields[4]})
    return steps


def bench_args(name):
    """{'op': 0, 'precision': 1} from 'BM_LayerOpVsCublas/op:0/precision:1/manual_time'."""
    args = {}
    for part in name.split("/")[1:]:
        key, sep, value = part.partition(":")
        if sep and value.lstrip("-").isdigit():
            args[key] = int(value)
    return args


def ctest_section(out, checks):
    root = None
    try:
        root = ET.parse(os.path.join(out, "ctest-gpu.xml")).getroot()
    except (OSError, ET.ParseError):
        return []
    cases = root.iter("testcase")
    ran, failed, skipped, wanting = [], [], [], []
    for case in cases:
        name = case.get("name", "?")
        status = case.get("status", "")
        if status in ("notrun", "disabled") or case.find("skipped") is not None:
            # A case that needs a GPU per rank says so on its SKIPPED line: on a machine of fewer
            # GPUs it cannot run, which is not a GPU the run failed to use.
            said = [line for line in (case.findtext("system-out") or "").splitlines() if line.startswith("SKIPPED:")]
            (wanting if any("GPU per rank" in line for line in said) else skipped).append(name)
        elif status == "fail" or case.find("failure") is not None:
            failed.append(name)
        else:
            ran.append(name)
    named = ", ".join(skipped[:3]) + (f" and {len(skipped) - 3} more" if len(skipped) > 3 else "")
    wanted = f"; {len(wanting)} need a GPU per rank: {', '.join(wanting)}" if wanting else ""
    checks.append(("no gpu test skipped on a usable GPU", "fail" if skipped else "pass",
                   (f"{len(skipped)} skipped: {named}" if skipped else f"{len(ran) + len(failed)} run") + wanted))
    lines = ["## ctest -L gpu", "", f"{len(ran)} passed, {len(failed)} failed, {len(skipped) + len(wanting)} skipped", ""]
    lines += [f"- failed: {n}" for n in failed] + [f"- skipped: {n}" for n in skipped]
    lines += [f"- skipped, needs a GPU per rank: {n}" for n in wanting]
    return lines + ([""] if failed or skipped or wanting else [])


@functools.lru_cache(maxsize=None)  # one device for every scenario of a report: resolved once
def dense_peaks(device):
    """{precision: dense peak FLOP/s} of a library device file, as stagecraft resolves it (the
    roofline's device of block.explain); {} when it cannot say."""
    try:
        _, resolved = block.explain(cli(), device, 64, 1, 8, 1, "bf16", False)
    except (ToolError, OSError, ValueError, KeyError):
        return {}
    return dict(resolved.get("peak_flops_by_dtype") or {})


def gpu_of(backend):
    """The GPU's name in an execute JSON's backend ("cuda:0 (NVIDIA H200)" -> "NVIDIA H200"), or None."""
    found = re.fullmatch(r"cuda:\d+ \((.+)\)", backend or "")
    return found.group(1) if found else None


def utilization(measured):
    """(the peak's description, {schedule: (model TFLOP/s per GPU, its fraction of the peak or
    None)}) of an execute JSON: each schedule's measured model FLOPs (model_tflops_per_device)
    against the dense peak, in the run's precision, of the library's entry for the GPU it ran on."""
    gpu, precision = gpu_of(measured.get("backend")), measured.get("precision")
    device = block.device_file_for(gpu) if gpu else None
    peak = dense_peaks(device).get(precision) if device and precision else None
    if peak:
        said = f"{gpu}'s dense {precision} peak, {peak / 1e12:.1f} TFLOP/s (scenarios/devices/{device}.yaml)"
    else:
        said = (f"no dense peak known for {gpu or measured.get('backend') or 'the device'} in "
                f"{precision or 'an unstated precision'}")
    out = {}
    for s in measured.get("schedules", []):
        tflops = s.get("model_tflops_per_device")
        if isinstance(tflops, (int, float)):
            out[s["schedule"]] = (tflops, tflops * 1e12 / peak if peak else None)
    return said, out


def compare_section(out, scenario, checks):
    c = load_json(os.path.join(out, scenario, "compare.json"))
    if c is None:
        return []
    whatif = load_json(os.path.join(out, scenario, "whatif-compare.json")) or {}
    whatif = {s["schedule"]: s["step_time_ms"].get("error_pct") for s in whatif.get("schedules", [])}
    peak_said, used = utilization(load_json(os.path.join(out, scenario, "measured.json")) or {})
    pct = lambda x: "-" if x is None else f"{x:+.1f}%"
    lines = [f"## {scenario}: predicted vs measured", "",
             "Step-time error = cost drift (the run's own op times against the prediction's) + model error "
             "(their replay against the run); what-if: the run's 1F1B replayed into the schedule, against its run. "
             f"Model TFLOP/s: the measured step's model FLOPs per GPU (6 x the parameters its matmuls use, and "
             f"attention's); MFU: of {peak_said}.", "",
             "| schedule | predicted step (ms) | measured step (ms) | error | cost drift | model error | what-if error "
             "| bubble predicted | bubble measured | model TFLOP/s | MFU |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for s in c.get("schedules", []):
        st, bf = s["step_time_ms"], s["bubble_fraction"]
        tflops, mfu = used.get(s["schedule"], (None, None))
        lines.append(f"| {s['schedule']} | {st['predicted']:.3f} | {st['measured']:.3f} | {pct(st.get('error_pct'))} | "
                     f"{pct(s.get('cost_drift_pct'))} | {pct(s.get('model_error_pct'))} | "
                     f"{pct(whatif.get(s['schedule']))} | {100 * bf['predicted']:.1f}% | {100 * bf['measured']:.1f}% | "
                     f"{'-' if tflops is None else f'{tflops:.2f}'} | {'-' if mfu is None else f'{100 * mfu:.1f}%'} |")
    missing = c.get("only_in_predicted", [])
    checks.append((f"{scenario}: every schedule measured", "fail" if missing else "pass",
                   ("not measured: " + ", ".join(missing)) if missing else f"{len(c.get('schedules', []))} schedules"))
    return lines + [""]


def is_flush(schedule):
    """Whether an execute JSON's schedule record is a flush schedule's (every stage's weights
    current: no delay), by its stages' weight delays where it has them, else by its name."""
    delays = [st.get(k) for st in schedule.get("stages", []) for k in ("weight_delay_forward", "weight_delay_backward")]
    if delays and all(isinstance(d, (int, float)) for d in delays):
        return all(d == 0 for d in delays)
    return schedule.get("schedule") in FLUSH_SCHEDULES


def flush_loss_mismatch(run, rtol=LOSS_RTOL):
    """The flush schedules of an execute run (its JSON, loaded) against one of them, 1F1B where it
    ran: returns (their names, the reference's name, None when every step's loss is within rtol of
    the reference's, else what differs first, in words). A NaN never matches."""
    losses = {s["schedule"]: s.get("losses") or [] for s in run.get("schedules", []) if is_flush(s)}
    if not losses:
        return [], None, None
    ref = "1f1b" if "1f1b" in losses else next(iter(losses))
    want = losses[ref]
    for name, got in losses.items():
        if len(got) != len(want):
            return list(losses), ref, f"{name}: {len(got)} losses, {ref} {len(want)}"
        for step, (a, b) in enumerate(zip(got, want)):
            if not abs(a - b) <= rtol * abs(b):
                return list(losses), ref, f"{name} step {step}: {a:.6g}, {ref} {b:.6g}"
    return list(losses), ref, None


def losses_check(out, run_name, checks):
    """The check that a run's flush schedules trained alike (two of them at least)."""
    run = load_json(os.path.join(out, run_name, "measured.json"))
    if run is None:
        return
    names, ref, problem = flush_loss_mismatch(run)
    if len(names) < 2:
        return
    steps = max(len(s.get("losses") or []) for s in run["schedules"] if s["schedule"] in names)
    checks.append((f"{run_name}: the flush schedules' losses alike", "fail" if problem else "pass",
                   problem or f"{len(names)} schedules, {steps} steps, within {LOSS_RTOL:g} of {ref}'s"))


def graphs_check(out, run_name, checks):
    """A run's 1F1B executed again with step graphs (measured-graphs.json beside measured.json):
    its losses within LOSS_RTOL of the run issued call by call, the two runs' later step times
    and per-op overheads in the detail."""
    eager = load_json(os.path.join(out, run_name, "measured.json"))
    graphs = load_json(os.path.join(out, run_name, "measured-graphs.json"))
    if graphs is None:
        return
    first = lambda run: next((s for s in (run or {}).get("schedules", []) if s.get("schedule") == "1f1b"), None)
    e, g = first(eager), first(graphs)
    name = f"{run_name}: 1f1b with step graphs trains as issued call by call"
    if e is None or g is None:
        checks.append((name, "fail", "no 1f1b in " + ("measured.json" if e is None else "measured-graphs.json")))
        return
    want, got = e.get("losses") or [], g.get("losses") or []
    problem = f"{len(got)} losses, {len(want)} issued call by call" if len(got) != len(want) or not want else next(
        (f"step {t}: {a:.6g}, call by call {b:.6g}" for t, (a, b) in enumerate(zip(got, want))
         if not abs(a - b) <= LOSS_RTOL * abs(b)), None)
    later = lambda s: s.get("step_ms", [])[2:] or s.get("step_ms", [])
    mean = lambda v: sum(v) / len(v) if v else float("nan")
    detail = (f"{len(got)} steps within {LOSS_RTOL:g}; steps from 2: {mean(later(g)):.2f} ms with graphs, "
              f"{mean(later(e)):.2f} ms call by call; overhead {g.get('overhead_ns_per_op', 0) / 1e3:.2f} and "
              f"{e.get('overhead_ns_per_op', 0) / 1e3:.2f} us per op")
    checks.append((name, "fail" if problem else "pass", problem or detail))


def skip_reason(message):
    """What GTEST_SKIP() said, from gtest's XML message ('file:line\nSkipped\nwhy')."""
    lines = [line.strip() for line in (message or "").splitlines()]
    if lines and lines[0].rpartition(":")[2].isdigit():
        lines = lines[1:]
    return " ".join(line for line in lines if line and line != "Skipped") or "skipped"


def mpi_gpu_section(out, checks):
    """exec_mpi_gpu_tests on 4 ranks, case by case (gtest's XML): a case that skipped (a GPU per
    rank wanted, a cpu-only case) is a skipped row of its own reason, never a pass."""
    try:
        root = ET.parse(os.path.join(out, "exec-mpi-gpu.xml")).getroot()
    except (OSError, ET.ParseError):
        return []
    ran, failed, skipped = [], [], {}
    for case in root.iter("testcase"):
        name = f"{case.get('classname', '?')}.{case.get('name', '?')}"
        skip = case.find("skipped")
        if case.find("failure") is not None:
            failed.append(name)
        elif skip is not None or case.get("result") == "skipped":
            skipped.setdefault(skip_reason(skip.get("message") if skip is not None else ""), []).append(name)
        elif case.get("result") != "suppressed" and case.get("status") != "notrun":
            ran.append(name)
    for reason, names in skipped.items():
        named = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
        checks.append((f"exec.mpi_gpu, 4 ranks: {len(names)} case(s) skipped", "skip", f"{reason}: {named}"))
    count = sum(map(len, skipped.values()))
    lines = ["## exec.mpi_gpu, 4 ranks, case by case", "", f"{len(ran)} passed, {len(failed)} failed, {count} skipped", ""]
    lines += [f"- failed: {n}" for n in failed]
    lines += [f"- skipped: {n}: {reason}" for reason, names in skipped.items() for n in names]
    return lines + ([""] if failed or skipped else [])


def benchmarks(out, name):
    """A Google Benchmark JSON's runs, one per benchmark: where a benchmark ran repeated, its
    median (the aggregate Google Benchmark wrote) under the benchmark's own name, with
    `median_of` (the repetitions that ran) and, per counter, its `range` over them (min, max); a
    repetition that failed is kept as a run of its own, so that its error is reported. Other
    aggregates (mean, stddev, cv) are dropped; a run without `run_name` (an older Google
    Benchmark's) is kept as it is."""
    b = load_json(os.path.join(out, name))
    if b is None:
        return None
    runs = b.get("benchmarks", [])
    medians = {r["run_name"]: r for r in runs if r.get("run_name") is not None
               and r.get("run_type") == "aggregate" and r.get("aggregate_name") == "median"}
    kept = []
    for r in runs:
        median = medians.get(r.get("run_name"))
        if r.get("error_occurred") or (median is None and r.get("run_type") != "aggregate"):
            kept.append(r)
        elif r is median:
            reps = [x for x in runs if x.get("run_name") == r["run_name"] and x.get("run_type") != "aggregate"
                    and not x.get("error_occurred")]
            r = dict(r, name=r["run_name"], median_of=len(reps) or r.get("repetitions"), range={
                k: (min(x[k] for x in reps), max(x[k] for x in reps)) for k, v in r.items()
                if isinstance(v, (int, float)) and reps and all(isinstance(x.get(k), (int, float)) for x in reps)})
            kept.append(r)
    return kept


def cuda_bench_section(out, checks):
    runs = benchmarks(out, "cuda_bench.json")
    if runs is None:
        return []
    lines = ["## GEMM efficiency against cuBLAS (cuda_bench)", "",
             "Each layer op against a bare cuBLAS call of its own GEMM. Steady state: after the weights' first "
             "update (their 16-bit copy made once); first step: bf16 rounds the weights at each call. "
             "The target is judged in the steady state.", "",
             "| op | precision | state | TFLOPS | bare cuBLAS TFLOPS | of_cublas |",
             "| --- | --- | --- | ---: | ---: | ---: |"]
    ratios, overhead, calls, errors = [], [], [], []
    for r in runs:
        if r.get("error_occurred"):
            errors.append(f"{r['name']}: {r.get('error_message', '')}")
            continue
        a = bench_args(r["name"])
        if r["name"].startswith("BM_LayerOpVsCublas") and "of_cublas" in r:
            op, prec = OPS.get(a.get("op"), "?"), PRECISIONS.get(a.get("precision"), "?")
            steady = a.get("stepped", 1) == 1
            if steady:
                ratios.append((r["of_cublas"], f"{op} {prec}"))
            lines.append(f"| {op} | {prec} | {'steady' if steady else 'first step'} | {r.get('TFLOPS', 0):.1f} | "
                         f"{r.get('cublas_TFLOPS', 0):.1f} | {r['of_cublas']:.3f} |")
        elif r["name"].startswith("BM_RuntimeOverheadPerOp") and "us_per_op" in r:
            overhead.append(("cuda" if a.get("cuda", 1) else "cpu", r))
        elif r["name"].startswith("BM_CudaCallCost") and "us_per_call" in r:
            calls.append((r.get("label", r["name"]), r.get("us_per_call_issued"), r["us_per_call"]))
    cell = lambda v: "-" if v is None else f"{v:.2f}"
    lines += ["", "## Runtime overhead per op (cuda_bench)", "",
              "A run's time beyond a shorter run's, per op it adds (its ops' kernel launches included: the target's "
              "measure); the same ops' math issued with no runtime around it, timed the same way; their difference, "
              "what the runtime adds per op; and the longer run's whole time per op, its set-up included.", "",
              "| device | run, us per op | the ops' math alone | the runtime's own | with the run's set-up |",
              "| --- | ---: | ---: | ---: | ---: |"]
    def counter(r, key, ranged=True):  # a counter of the run, with its range over the repetitions
        rng = r.get("range", {}).get(key) if ranged and key in r else None
        return cell(r.get(key)) + ("" if rng is None else f" ({rng[0]:.2f}-{rng[1]:.2f})")
    lines += [f"| {d} | {counter(r, 'us_per_op')} | {counter(r, 'math_us_per_op')} | "
              f"{counter(r, 'runtime_us_per_op')} | {counter(r, 'us_per_op_with_setup', ranged=False)} |"
              for d, r in overhead] + [""]
    reps = sorted({r["median_of"] for _, r in overhead if r.get("median_of")})
    if reps:
        lines[-1:-1] = ["", f"Each the median of {'/'.join(map(str, reps))} repetitions (their range in brackets)."]
    if calls:
        lines += ["One call of each kind those ops make on the GPU, 1000 back to back: the host's time to queue "
                  "one, and the time per call until the GPU has run them all.", "",
                  "| call | queued, us per call | run, us per call |", "| --- | ---: | ---: |"]
        lines += [f"| {name} | {cell(issued)} | {us:.2f} |" for name, issued, us in calls] + [""]
    if errors:
        checks.append(("cuda_bench: every benchmark ran", "fail", "; ".join(errors)))
    if ratios:
        worst = min(ratios)
        checks.append((f"GEMM at least {OF_CUBLAS_TARGET} of bare cuBLAS in every op and precision (steady state)",
                       "pass" if worst[0] >= OF_CUBLAS_TARGET else "fail", f"worst {worst[1]}: {worst[0]:.3f}"))
    # The target as it was set, on the whole run's cost per op (its ops' CUDA calls included); and
    # beside it the runtime's own part (the run less the same ops' math), where the bench has it.
    cuda = [(r["us_per_op"], r.get("math_us_per_op"), r.get("runtime_us_per_op")) for d, r in overhead if d == "cuda"]
    if cuda:
        us = max(r[0] for r in cuda)
        checks.append((f"runtime overhead at most {US_PER_OP_TARGET:g} us per op on the GPU",
                       "pass" if us <= US_PER_OP_TARGET else "fail", f"{us:.2f} us"))
        own = [(o, m) for _, m, o in cuda if o is not None]
        if own:
            o, m = max(own)
            checks.append((f"the runtime's own part at most {US_PER_OP_TARGET:g} us per op on the GPU "
                           "(the run less its ops' math)", "pass" if o <= US_PER_OP_TARGET else "fail",
                           f"{o:.2f} us (its ops' math alone {m:.2f})"))
    return lines


def step_graphs_section(out, checks):
    """cuda_bench's BM_StepGraphs: gpt-gpu's model on one rank issued call by call and replayed
    from step graphs, the device's idle time between ops per op (judged with graphs against
    GRAPH_IDLE_US_TARGET) beside the host's cost per op and the step time."""
    runs = [r for r in benchmarks(out, "cuda_bench.json") or [] if r["name"].startswith("BM_StepGraphs")
            and not r.get("error_occurred") and "gpu_idle_us_per_op" in r]
    if not runs:
        return []
    lines = ["## Step graphs at gpt-gpu's shape (cuda_bench)", "",
             "gpt-gpu's 12 blocks on one rank, 1F1B, 8 microbatches of 2, TF32; from step 2 on. GPU idle: the "
             "device's time between consecutive ops, per op, from the run's own stamps (inside a captured "
             "segment apart); host: the host's time on the run's work per op (its waits for the read-backs "
             "left out).", "",
             "| issue | GPU idle, us per op | between passes of a segment | host, us per op | step, ms | samples/s |",
             "| --- | ---: | ---: | ---: | ---: | ---: |"]
    judged = []
    for r in sorted(runs, key=lambda r: bench_args(r["name"]).get("graphs", 0)):
        graphs = bench_args(r["name"]).get("graphs", 0) == 1
        lines.append(f"| {'step graphs' if graphs else 'call by call'} | {r['gpu_idle_us_per_op']:.2f} | "
                     f"{r.get('gpu_idle_us_per_pass', 0):.2f} | {r.get('host_us_per_op', 0):.2f} | "
                     f"{r.get('step_ms', 0):.1f} | {r.get('samples_per_s', 0):.1f} |")
        if graphs:
            judged.append(r["gpu_idle_us_per_op"])
    if judged:
        checks.append((f"GPU idle at most {GRAPH_IDLE_US_TARGET:g} us per op with step graphs (gpt-gpu, one rank)",
                       "pass" if max(judged) <= GRAPH_IDLE_US_TARGET else "fail", f"{max(judged):.2f} us"))
    return lines + [""]


def kernel_bandwidth_section(out, checks):
    """cuda_bench's BM_KernelBandwidth: each kernel's bytes per second and its share of the GPU's
    memory bandwidth (of_peak), judged against OF_PEAK_TARGET for all but the column sums."""
    runs = [r for r in benchmarks(out, "cuda_bench.json") or [] if r["name"].startswith("BM_KernelBandwidth")
            and not r.get("error_occurred") and "of_peak" in r]
    if not runs:
        return []
    lines = ["## Kernels against the GPU's memory bandwidth (cuda_bench)", "",
             f"The bytes each kernel must move at least over its time; target: the element-wise and row kernels at "
             f"least {OF_PEAK_TARGET:g} of the peak (the column sums {', '.join(COLUMN_KERNELS)} not judged).", "",
             "| kernel | GB/s | of peak |", "| --- | ---: | ---: |"]
    judged = []
    for r in runs:
        name = r.get("label") or r["name"]
        lines.append(f"| {name} | {r.get('GB_per_s', 0):.0f} | {r['of_peak']:.2f} |")
        if name not in COLUMN_KERNELS:
            judged.append((r["of_peak"], name))
    if judged:
        worst = min(judged)
        checks.append((f"element-wise and row kernels at least {OF_PEAK_TARGET:g} of the memory bandwidth",
                       "pass" if worst[0] >= OF_PEAK_TARGET else "fail", f"worst {worst[1]}: {worst[0]:.2f}"))
    return lines + [""]


def of_raw_nccl(table):
    """The NcclTransport's bandwidth over raw NCCL's ({bytes: {path: GB/s}}) at the largest message
    both were measured at: (bytes, ratio), or None."""
    both = [size for size, row in table.items() if row.get(0) and 1 in row]
    if not both:
        return None
    size = max(both)
    return size, table[size][1] / table[size][0]


def p2p_section(out, checks):
    runs = benchmarks(out, "nccl_p2p_bench.json")
    if runs is None:
        return []
    table = {}
    for r in runs:
        a = bench_args(r["name"])
        if "bytes_per_second" in r and "path" in a:
            table.setdefault(a.get("bytes", 0), {})[a["path"]] = r["bytes_per_second"] / 1e9
    lines = ["## Point-to-point bandwidth, GB/s (nccl_p2p_bench, 2 ranks)", "",
             "| bytes | " + " | ".join(PATHS.values()) + " | NcclTransport / raw NCCL |",
             "| ---: |" + " ---: |" * (len(PATHS) + 1)]
    for size in sorted(table):
        row = table[size]
        cells = [f"{row[p]:.2f}" if p in row else "-" for p in PATHS]
        cells.append(f"{row[1] / row[0]:.3f}" if row.get(0) and 1 in row else "-")
        lines.append(f"| {size} | " + " | ".join(cells) + " |")
    judged = of_raw_nccl(table)
    if judged:
        size, ratio = judged
        checks.append((f"NcclTransport at least {OF_RAW_NCCL_TARGET} of raw NCCL's bandwidth (within 10%, largest message)",
                       "pass" if ratio >= OF_RAW_NCCL_TARGET else "fail",
                       f"{ratio:.3f} at {size} bytes ({table[size][1]:.2f} / {table[size][0]:.2f} GB/s)"))
    return lines + [""]


def peer_section(out):
    """The PyTorch peer step's table (gpu_peer_bench's output, as its log holds it): a measurement,
    its verdict its own line."""
    try:
        with open(os.path.join(out, "logs", "PyTorch_peer.log")) as f:
            text = f.read().rstrip("\n")
    except OSError:
        return []
    return ["## gpt-gpu on one rank beside PyTorch (eager, torch.compile)", "", "```", text, "```", ""]


def layer_probe_section(out):
    """scripts/layer-probe.sh's reports (eager, and fused in layer-probe-fused/), as it wrote them
    (measurements: no pass or fail of their own)."""
    lines = []
    for path in (os.path.join(out, "layer-probe.md"), os.path.join(out, "layer-probe-fused", "layer-probe.md")):
        try:
            with open(path) as f:
                lines += ["#" + f.read().rstrip("\n"), ""]  # its title one level down
        except OSError:
            pass
    return lines


def zb_fork_section(out):
    """scripts/zb-fork-layer.sh's run: the Zero Bubble release's own middle stage, per model and
    TorchScript setting (measurements: no pass or fail of their own)."""
    run = load_json(os.path.join(out, "zb-fork-layer.json"))
    if not run:
        return []
    # The list's prediction of the same layers (zb-fork-layer.sh --compare, after a GPU run).
    compare = load_json(os.path.join(out, "zb-fork-layer.compare.json")) or {}
    predicted = {key: e["predicted_ms"] for key, e in compare.get("models", {}).items()}
    lines = ["## The Zero Bubble paper's own stage, its own timers (scripts/zb-fork-layer.sh)", "",
             f"{run.get('device', '?')}, PyTorch {run.get('torch', '?')}; built: {', '.join(run.get('built', [])) or '-'}; "
             f"LayerNorm: {run.get('layer_norm', '?')}. Per layer, ms (mean over the timed iterations); the list's "
             f"ratios are the roofline model's for the same layer on {compare.get('device', '-')} in the runtime's "
             "split (W: the weight GEMMs alone), the paper's its A100 profile's (Appendix D).", "",
             "| model | TorchScript | layers | softmax | F | B | W | B/F measured / list / paper | "
             "W/F measured / list / paper |",
             "| --- | --- | ---: | --- | ---: | ---: | ---: | --- | --- |"]
    for key, e in run.get("models", {}).items():
        m, p = e["mean_ms"], predicted.get(key)
        b_list, w_list = (f"{p['B'] / p['F']:.3f}", f"{p['W'] / p['F']:.3f}") if p else ("-", "-")
        lines.append(f"| {key.split('/')[0]} | {e.get('fuser', e['jit'])} | {e['layers']} | "
                     f"{'Apex fused' if e['softmax_fused'] else 'unfused'} | {m['F']:.3f} | {m['B']:.3f} | {m['W']:.3f} | "
                     f"{e['b_over_f']:.3f} / {b_list} / {e['paper_b_over_f']:.3f} | "
                     f"{e['w_over_f']:.3f} / {w_list} / {e['paper_w_over_f']:.3f} |")
    return lines + [""]


def main(argv):
    if len(argv) != 1:
        raise usage_error("usage: scripts/tool.sh gpu_report OUT")
    out = argv[0]
    if not os.path.isdir(out):
        raise ToolError(f"{out}: no such report folder")
    steps = read_steps(out)
    checks = []
    body = []
    body += ctest_section(out, checks)
    body += mpi_gpu_section(out, checks)
    for scenario in sorted(d for d in os.listdir(out) if os.path.isdir(os.path.join(out, d)) and d != "logs"):
        body += compare_section(out, scenario, checks)
        losses_check(out, scenario, checks)
        graphs_check(out, scenario, checks)
    body += cuda_bench_section(out, checks)
    body += step_graphs_section(out, checks)
    body += kernel_bandwidth_section(out, checks)
    body += p2p_section(out, checks)
    body += peer_section(out)
    body += layer_probe_section(out)
    body += zb_fork_section(out)
    rows = [(s["name"], s["status"], f"{s['seconds']:.0f} s", s["detail"]) for s in steps]
    rows += [(name, status, "", detail) for name, status, detail in checks]
    passed = sum(1 for r in rows if r[1] == "pass")
    failed = sum(1 for r in rows if r[1] == "fail")
    skipped = sum(1 for r in rows if r[1] == "skip")
    devices = load_json(os.path.join(out, "devices.json")) or {}
    now = datetime.datetime.now().strftime("%Y-%m-%d %H:%M")
    md = [f"# GPU check, {now} on {socket.gethostname()}", "", "```"] + devices.get("lines", ["(no devices.json)"])
    md += ["```", "", "| step or check | result | time | detail |", "| --- | --- | ---: | --- |"]
    md += [f"| {n} | {'PASS' if s == 'pass' else 'FAIL' if s == 'fail' else 'skipped'} | {t} | "
           f"{d.replace('|', '/')} |" for n, s, t, d in rows]
    md += [""] + body + [f"{skipped} skipped", "", f"{passed} passed, {failed} failed"]
    with open(os.path.join(out, "report.md"), "w") as f:
        f.write("\n".join(md) + "\n")
    summary = {"passed": passed, "failed": failed, "skipped": skipped,
               "rows": [{"name": n, "result": s, "time": t, "detail": d} for n, s, t, d in rows]}
    with open(os.path.join(out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=2)
        f.write("\n")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(entry("gpu_report", main))
