"""Regenerates the README's picture of the viewer (docs/viewer.png) from the default scenario's
traces: predicted and measured 1f1b overlaid, with predicted gpipe and zb-h1 side by side on the
same time axis, zoomed to the first two steps. scripts/run.sh writes the traces (build/out)."""
import shutil
from pathlib import Path

from . import common

TRACES = ["predicted.trace.1f1b.json", "measured.trace.1f1b.json", "predicted.trace.gpipe.json",
          "predicted.trace.zb-h1.json"]


def time_range(traces):
    """The first two steps (and a little) of the slowest trace, "0:END_MS", from the summaries in
    the traces' "stagecraft" objects; "" when none states a step time."""
    step_ms = max((t.get("stagecraft", {}).get("summary", {}).get("step_time_ms", 0) for t in traces), default=0)
    return f"0:{2.15 * step_ms:.3f}" if step_ms > 0 else ""


def main(argv):
    parser = common.ArgumentParser(prog="screenshot.sh", description=__doc__.splitlines()[0])
    parser.add_argument("out", nargs="?", default=str(common.ROOT / "docs" / "viewer.png"), help="the PNG (default docs/viewer.png)")
    parser.add_argument("--traces", default=str(common.build_dir() / "out"), help="the traces' folder (default build/out)")
    args = parser.parse_args(argv)
    view = common.build_dir() / "viz" / "stagecraft-view"
    if not view.is_file():
        raise common.ToolError(f"{view} is missing: build with ./scripts/build.sh (needs libglfw3-dev, libimgui-dev)")
    files = [Path(args.traces) / f for f in TRACES]
    for f in files:
        if not f.is_file() or f.stat().st_size == 0:
            raise common.ToolError(f"{f} is missing: run ./scripts/run.sh first")
    span = time_range([common.read_json(f) for f in files])
    cmd = [str(view), *map(str, files), "--screenshot", args.out, "--frames", "5", "--width", "1600", "--height", "900"]
    if span:
        cmd += ["--range", span]
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    if shutil.which("xvfb-run"):
        cmd = ["xvfb-run", "-a", "-s", "-screen 0 1600x900x24", *cmd]
    common.run(cmd)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(common.entry("screenshot.sh", main))
