"""One transformer block as the roofline model predicts it, for the tools that set a GPU's
measurement beside it (layer_report, zb_fork_compare); no PyTorch needed. Bad input is a ToolError.

  load(path, what)         a GPU run's JSON whose "models" are not empty
  device_file(run, given)  the device file given, else the one for the run's GPU
  device_file_for(gpu)     the device file (scenarios/devices) of a GPU named as CUDA names it
  explain(sc, device, ...) the block's kernels as `stagecraft simulate --explain-json` times them,
                           {(pass, name): us}, and the device with every field resolved
  passes(kernels)          the kernels' time per pass, {F, I, W}, and in the Zero Bubble runtime's
                           split, {F, B, W} (its W holds the weight GEMMs alone: the column sums
                           of ZB_IN_B run in B)
  report_command(argv, prog, what, report)
                           a probe's `report PROBE.json --out DIR [--device-file NAME] [--set K=V]...`
  missing_gpu(torch, what) a GPU probe's SKIPPED line where it cannot run, "" where it can
  parse_cases(text, form, valid)
                           a probe's --cases, "AxB,AxB", as [(a, b)]
  gpu_median_us(torch, fn, reps)
                           fn() timed on the GPU between CUDA events, the queue kept full: the median
"""
import json
import os
import statistics
import subprocess
import tempfile

from . import common
from .common import ToolError

# The kernels of the list's W that the Zero Bubble runtime runs in B: its WeightGradStore defers
# only the linear layers' weight GEMMs (docs/cost-model.md, "What the profile's timers hold").
ZB_IN_B = ("fc2.db", "fc.db", "ln2.dgamma", "proj.db", "qkv.db", "ln1.dgamma")

_DEVICES = (("H200", "H200"), ("H100", "H100-SXM"), ("A100", "A100-SXM-80GB"), ("L40S", "L40S"))


def device_file_for(gpu):
    """The device file for a GPU's name, or None; none for a PCIe card of an SXM file (another
    card's peaks and clocks)."""
    file = next((file for key, file in _DEVICES if key in gpu), None)
    if file is not None and "PCIE" in gpu.upper() and "SXM" in file:
        return None
    return file


def load(path, what):
    """The JSON at `path` (a `what`'s: "probe", "run"), with models to compare."""
    try:
        with open(path) as fh:
            run = json.load(fh)
        models = run["models"]
        if not isinstance(models, (list, dict)):
            raise ValueError(f'"models" is a {type(models).__name__}')
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise ToolError(f"{path}: not a {what}'s JSON ({e})")
    if not models:
        raise ToolError(f"{path}: the {what} timed no model")
    return run


def device_file(run, given):
    """`given`, else the device file for the run's GPU."""
    name = str(run.get("device", ""))
    device = given or device_file_for(name)
    if device is None:
        raise ToolError(f"no device file for '{name}': name one with --device-file")
    return device


def explain(sc, device, hidden, heads, seq, microbatch, dtype, dropout, sets=()):
    """The block's kernels as the model times them and the resolved device."""
    with tempfile.TemporaryDirectory() as tmp:
        with open(f"{tmp}/block.yaml", "w") as fh:
            fh.write("name: one-block\n"
                     f"topology: {{device: {device}, nodes: 1, devices_per_node: 1, links: []}}\n"
                     f"model: {{transformer: {{layers: 1, hidden: {hidden}, heads: {heads}, seq: {seq}, "
                     f"vocab: 50304, dropout: {'true' if dropout else 'false'}}}}}\n"
                     f"pipeline: {{schedule: 1f1b, ranks: 1, microbatches: 1, microbatch_size: {microbatch}, steps: 1}}\n"
                     f"training: {{optimizer: adam, lr: 0.0001, dtype: {dtype}}}\n")
        r = subprocess.run([sc, "simulate", fh.name, "--explain-json", f"{tmp}/explain.json", *sets],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if r.returncode != 0:
            raise ToolError(f"simulate --explain-json failed: {(r.stderr.strip().splitlines() or ['?'])[-1]}")
        with open(f"{tmp}/explain.json") as fh:
            explained = json.load(fh)
    block = next((s for s in explained["sections"] if s["id"] == "block"), None)
    if block is None or not block["kernels"]:
        raise ToolError("simulate --explain-json listed no kernels of one transformer block")
    return {(k["pass"], k["name"]): k["time_us"] for k in block["kernels"]}, explained["device"]


def passes(kernels):
    """({F, I, W}, {F, B, W} in the Zero Bubble runtime's split) of {(pass, name): time}."""
    by_pass = {q: sum(v for (p, _), v in kernels.items() if p == q) for q in "FIW"}
    moved = sum(v for (_, n), v in kernels.items() if n in ZB_IN_B)
    return by_pass, {"F": by_pass["F"], "B": by_pass["I"] + moved, "W": by_pass["W"] - moved}


def report_command(argv, prog, what, report):
    """A probe's report subcommand (`argv` after "report"): parses PROBE.json, --out, --device-file
    and --set, runs report(stagecraft, json, out, device, sets) and prints its text."""
    ap = common.ArgumentParser(prog=prog, description=what)
    ap.add_argument("json", help="the probe's JSON")
    ap.add_argument("--out", required=True, help="the report's folder")
    ap.add_argument("--device-file", default="", help="the device file to predict with (default: from the GPU's name)")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="an override for the prediction")
    args = ap.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    print(report(common.cli(), args.json, args.out, args.device_file, common.sets(args.set)), end="")
    return 0


def missing_gpu(torch_module, what):
    """The SKIPPED line of a GPU probe (`what`, "the MoE probe") where it cannot run: no PyTorch
    (`torch_module` None) or no CUDA device; "" where it can."""
    if torch_module is None:
        return f"SKIPPED: {what} needs PyTorch"
    if not torch_module.cuda.is_available():
        return f"SKIPPED: {what} needs a CUDA device (torch.cuda.is_available() is false)"
    return ""


def parse_cases(text, form, valid):
    """A probe's --cases, "AxB,AxB", as [(a, b)]: each pair of integers `valid(a, b)` accepts; a
    usage error names a bad one and what `form` ("GROUPSxROWS, both positive") asks for."""
    cases = []
    for item in (c for c in text.split(",") if c):
        try:
            a, b = (int(v) for v in item.lower().split("x"))
            assert valid(a, b)
        except (ValueError, AssertionError):
            raise common.usage_error(f"--cases: '{item}': expected {form}")
        cases.append((a, b))
    if not cases:
        raise common.usage_error("--cases: no case")
    return cases


def gpu_median_us(torch_module, fn, reps):
    """fn() on the GPU, once to warm (kernels loaded, libraries' plans made), then `reps` times
    between CUDA events, each after a sleep kernel that keeps the queue full so the launches never
    show: the median, in µs."""
    fn()
    times = []
    for _ in range(reps):
        torch_module.cuda._sleep(1_000_000)
        start, end = torch_module.cuda.Event(enable_timing=True), torch_module.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch_module.cuda.synchronize()
        times.append(start.elapsed_time(end) * 1e3)
    return statistics.median(times)
