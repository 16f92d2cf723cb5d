"""One GEMM kept running on a GPU for tens of seconds, its rate window by window, beside the roofline
model's rate for the same GEMM: whether the rate the device file's kernel probes measured (seconds of
work at most, the clocks at their boost) holds once the GPU has run at its power limit for a while,
as every GPU of a training job does.

Why: with the tensor group's collectives taken as free, every dense row of Megatron-LM's H100 table
but one is predicted 10-21% fast, and so are the Mixtral rows, whose GEMMs are the largest of any
published MoE row (docs/results/moe-published.md). A GEMM rate that falls under sustained load would
explain both; this probe measures the fall instead of fitting it.

The GEMM is a transformer block's `fc` ([s, h] x [h, 4h], the list's name and shape) in bf16 or
fp16, run back to back in windows of about --window seconds (one CUDA event pair each, the next
window queued at once) for --seconds; each window's rate, and where PyTorch can read them (pynvml),
the SM clock and the board's power at its end. The first window is the burst rate, the median of the
last half the sustained one.

Usage (python3 -m stagecraft_tools.gemm_sustain, tools/ on PYTHONPATH; scripts/gemm-sustain.sh runs both):
  gemm_sustain.py [--hidden 4096] [--seq 8192] [--seconds 30] [--window 0.5] [--dtype bf16|fp16]
                  [--out FILE.json]   run on the GPU; prints "SKIPPED: ..." and exits 0 without PyTorch
                                      or a CUDA device
  gemm_sustain.py report PROBE.json --out DIR [--device-file NAME] [--set K=V]...
                                      the report (no PyTorch needed; $STAGECRAFT or the build's stagecraft)
"""
import json
import os
import statistics
import time

from . import block, common

try:
    import torch
except ImportError:  # the probe is optional: the build and tests never need PyTorch
    torch = None


def flops(seq, hidden):
    """The FLOPs of one `fc` GEMM: 2 x s x 4h x h."""
    return 2.0 * seq * 4 * hidden * hidden


def _reading(read):
    """read() or None where PyTorch cannot (no pynvml, no NVML)."""
    try:
        return float(read())
    except Exception:  # torch raises ModuleNotFoundError or RuntimeError by version
        return None


def probe(hidden, seq, seconds, window, dtype):
    """The windows of one GEMM run back to back: [{t_s, gemms, ms, tflops, clock_mhz, power_w}]."""
    a = torch.randn(seq, hidden, device="cuda", dtype=dtype)
    b = torch.randn(hidden, 4 * hidden, device="cuda", dtype=dtype)
    c = torch.empty(seq, 4 * hidden, device="cuda", dtype=dtype)
    # The product checked on a corner before it is timed (a wrong GEMM is not a rate).
    ref = a[:64].double() @ b[:, :64].double()
    torch.mm(a, b, out=c)
    if not torch.allclose(c[:64, :64].double(), ref, rtol=2e-2, atol=2e-2 * hidden ** 0.5):
        raise common.ToolError("the GEMM's product differs from its float64 reference")
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(3):
        torch.mm(a, b, out=c)
    stop.record()
    stop.synchronize()
    per_gemm_s = start.elapsed_time(stop) / 3 / 1e3
    count = max(1, int(window / per_gemm_s))
    windows, began = [], time.perf_counter()
    while time.perf_counter() - began < seconds:
        start.record()
        for _ in range(count):
            torch.mm(a, b, out=c)
        stop.record()
        stop.synchronize()
        ms = start.elapsed_time(stop)
        windows.append({"t_s": round(time.perf_counter() - began, 3), "gemms": count, "ms": ms,
                        "tflops": count * flops(seq, hidden) / ms / 1e9,
                        "clock_mhz": _reading(torch.cuda.clock_rate),
                        "power_w": _reading(lambda: torch.cuda.power_draw() / 1e3)})
    return windows


def summary(windows):
    """(burst, sustained, sustained / burst): the first window's TFLOP/s and the median of the last
    half's (of at least one window)."""
    if not windows:
        raise common.ToolError("the probe timed no window")
    rates = [w["tflops"] for w in windows]
    sustained = statistics.median(rates[len(rates) // 2:])
    return rates[0], sustained, sustained / rates[0]


def predicted_tflops(sc, device, hidden, seq, dtype, sets):
    """The roofline model's rate for the block's `fc` GEMM of this shape on `device`."""
    heads = next(a for a in (32, 16, 8, 4, 2, 1) if hidden % a == 0)
    kernels, _ = block.explain(sc, device, hidden, heads, seq, 1, dtype, False, sets)
    return flops(seq, hidden) / kernels[("F", "fc")] / 1e6


def _field(run, key, kind, path):
    value = run.get(key)
    if not isinstance(value, kind) or isinstance(value, bool):
        raise common.ToolError(f"{path}: expected the probe's {key}")
    return value


def report(sc, path, out, device, sets):
    """The report of the probe at `path` into folder `out` (its text returned)."""
    run = block.load(path, "probe")
    device = block.device_file(run, device)
    hidden, seq = _field(run, "hidden", int, path), _field(run, "seq", int, path)
    dtype = run.get("dtype")
    if dtype not in ("bf16", "fp16"):
        raise common.ToolError(f"{path}: expected the probe's dtype (bf16 or fp16)")
    windows = run["models"]
    if not all(isinstance(w, dict) and isinstance(w.get("tflops"), (int, float)) for w in windows):
        raise common.ToolError(f"{path}: every window needs its tflops")
    burst, sustained, ratio = summary(windows)
    predicted = predicted_tflops(sc, device, hidden, seq, dtype, sets)
    shape = f"[{seq}, {hidden}] x [{hidden}, {4 * hidden}]"
    md = [f"# A GEMM kept running on {run['device']} (PyTorch {run.get('torch', '?')}, {dtype}), predicted on "
          f"{device}", "",
          f"The block's `fc` GEMM, {shape}, back to back for {windows[-1].get('t_s', '?')} s in "
          f"{len(windows)} windows.", "",
          "| | TFLOP/s | of the model's |", "| --- | --- | --- |",
          f"| burst (the first window) | {burst:.0f} | {burst / predicted:.3f} |",
          f"| sustained (the median of the last half) | {sustained:.0f} | {sustained / predicted:.3f} |",
          f"| the model ({device}) | {predicted:.0f} | 1 |", "",
          f"Sustained over burst: {ratio:.3f}.", "",
          "| t (s) | TFLOP/s | SM clock (MHz) | power (W) |", "| --- | --- | --- | --- |"]
    for w in windows:
        clock, power = w.get("clock_mhz"), w.get("power_w")
        md.append(f"| {w.get('t_s', '?')} | {w['tflops']:.0f} | {'-' if clock is None else f'{clock:.0f}'} | "
                  f"{'-' if power is None else f'{power:.0f}'} |")
    text = "\n".join(md) + "\n"
    common.write_text(os.path.join(out, "gemm-sustain.md"), text)
    common.write_text(os.path.join(out, "gemm-sustain-compare.json"), json.dumps(
        {"device": device, "probe_device": run["device"], "shape": [seq, 4 * hidden, hidden], "burst_tflops": burst,
         "sustained_tflops": sustained, "sustained_over_burst": ratio, "predicted_tflops": predicted},
        indent=1) + "\n")
    return text


def main(argv):
    if argv[:1] == ["report"]:
        return block.report_command(argv[1:], "gemm-sustain.sh (report)", "the sustained GEMM's report", report)
    ap = common.ArgumentParser(prog="gemm_sustain", description=__doc__.split("\n\n")[0])
    ap.add_argument("--hidden", type=int, default=4096)
    ap.add_argument("--seq", type=int, default=8192)
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--window", type=float, default=0.5)
    ap.add_argument("--dtype", choices=("bf16", "fp16"), default="bf16")
    ap.add_argument("--out")
    args = ap.parse_args(argv)
    if args.hidden < 1 or args.seq < 1 or not args.seconds > 0 or not args.window > 0:
        raise common.usage_error("--hidden, --seq, --seconds and --window must be positive")
    if skipped := block.missing_gpu(torch, "the sustained GEMM probe"):
        print(skipped)
        return 0
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}[args.dtype]
    windows = probe(args.hidden, args.seq, args.seconds, args.window, dtype)
    run = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__, "dtype": args.dtype,
           "hidden": args.hidden, "seq": args.seq, "models": windows}
    if args.out:
        common.write_text(args.out, json.dumps(run, indent=1) + "\n")
    burst, sustained, ratio = summary(windows)
    print(f"{len(windows)} windows: burst {burst:.0f} TFLOP/s, sustained {sustained:.0f} TFLOP/s ({ratio:.3f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(common.entry("gemm_sustain", main))
