"""What every tool shares: where the sources and the build are, one-line errors (ToolError,
caught once by `entry`), running `stagecraft` (alone or under MPI) with its output in a log, the
project's Python module for simulations, and the statistics the reports print."""
import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "data"
SCENARIOS = ROOT / "scenarios"


class ToolError(Exception):
    """Bad input or a failed run: printed as one line, exit status 1 (2 for usage)."""

    def __init__(self, message, status=1):
        super().__init__(message)
        self.status = status


def usage_error(message):
    return ToolError(message, status=2)


class ArgumentParser(argparse.ArgumentParser):
    """argparse's parser whose errors are a usage ToolError: one line, exit 2."""

    def error(self, message):
        raise usage_error(message)


def entry(tool, main, argv=None):
    """Runs `main(argv)` as a command: a ToolError (or an interrupt) becomes one line on stderr
    naming `tool`, and the exit status; no traceback."""
    try:
        code = main(sys.argv[1:] if argv is None else argv)
    except ToolError as e:
        print(f"{tool}: {e}", file=sys.stderr)
        return e.status
    except KeyboardInterrupt:
        print(f"{tool}: interrupted", file=sys.stderr)
        return 130
    return code or 0


def build_dir():
    """The build folder: $STAGECRAFT_BUILD, else the one $STAGECRAFT (a build's cli/stagecraft)
    lies in, else build/ beside the sources."""
    if "STAGECRAFT_BUILD" in os.environ:
        return Path(os.environ["STAGECRAFT_BUILD"])
    if "STAGECRAFT" in os.environ:
        return Path(os.environ["STAGECRAFT"]).resolve().parent.parent
    return ROOT / "build"


def cli():
    """The `stagecraft` command: $STAGECRAFT, else the build's; a ToolError when missing."""
    path = Path(os.environ.get("STAGECRAFT", build_dir() / "cli" / "stagecraft"))
    if not os.access(path, os.X_OK):
        raise ToolError(f"missing {path}: run scripts/build.sh first")
    return str(path)


def module():
    """The project's Python module `stagecraft` (build/python), imported once."""
    python_dir = str(build_dir() / "python")
    if python_dir not in sys.path:
        sys.path.insert(0, python_dir)
    try:
        import stagecraft
    except ImportError as e:
        raise ToolError(f"cannot import the stagecraft module from {python_dir} ({e}): run scripts/build.sh first")
    return stagecraft


def simulate(scenario, sets=(), text=None):
    """The metrics of each schedule of a scenario (a path, or YAML `text`) with `sets` ("k=v"
    overrides), as `stagecraft simulate --json` writes them: a list of dicts."""
    sc = module()
    try:
        loaded = sc.Scenario.from_yaml(text, list(sets)) if text is not None else sc.Scenario.load(str(scenario), list(sets))
        return [run.to_dict() for run in sc.simulate(loaded)]
    except sc.InputError as e:
        raise ToolError(str(e))


def run(args, log=None):
    """Runs a command; its stdout and stderr go to `log` (a path) when given. Returns stdout's
    text (the log's when logged); a failure is a ToolError naming the command and its last line."""
    args = [str(a) for a in args]
    try:
        if log is None:
            done = subprocess.run(args, capture_output=True, text=True)
            text, err = done.stdout, done.stderr
        else:
            with open(log, "w") as fh:
                done = subprocess.run(args, stdout=fh, stderr=subprocess.STDOUT, text=True)
            text = err = Path(log).read_text()
    except OSError as e:
        raise ToolError(f"cannot run {args[0]}: {e.strerror}")
    if done.returncode != 0:
        last = (err.strip().splitlines() or ["no output"])[-1]
        raise ToolError(f"{Path(args[0]).name} {' '.join(args[1:3])}... failed ({done.returncode}): {last}")
    return text


def mpirun(np, args, log=None):
    """`args` under MPI on `np` processes, through scripts/mpirun.sh."""
    return run([ROOT / "scripts" / "mpirun.sh", str(np), *args], log)


def sets(pairs):
    """["k=v", ...] as --set arguments."""
    return [a for p in pairs for a in ("--set", p)]


def read_json(path):
    """A JSON file's content; a ToolError naming the file when unreadable."""
    try:
        with open(path) as fh:
            return json.load(fh)
    except (OSError, ValueError) as e:
        raise ToolError(f"{path}: not readable JSON ({e})")


def read_yaml(path):
    """A YAML file's content; a ToolError naming the file when unreadable."""
    import yaml  # PyYAML (python3-yaml): only the tools that read YAML need it
    try:
        with open(path) as fh:
            return yaml.safe_load(fh)
    except (OSError, yaml.YAMLError) as e:
        raise ToolError(f"{path}: not readable YAML ({' '.join(str(e).split())})")  # PyYAML's spans lines


def write_text(path, text):
    """Writes a whole file at once (a temporary file, then renamed): never half written."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    tmp.replace(path)


def positive_int(text, what):
    """`text` as an integer >= 1, else a usage error naming `what`."""
    try:
        value = int(text)
    except (TypeError, ValueError):
        value = 0
    if value < 1:
        raise usage_error(f"{what}: expected a positive integer, got '{text}'")
    return value


def median_abs(values):
    """The median of |v| over `values` (0 when empty)."""
    return statistics.median(abs(v) for v in values) if values else 0.0


def max_abs(values):
    """The largest |v| over `values` (0 when empty)."""
    return max((abs(v) for v in values), default=0.0)


def span_ms(schedule):
    """A schedule's largest per-rank span (first F start to last compute end), ms."""
    return max(r["span_ms"] for r in schedule["per_rank"])


def paper_bubble_rate(schedule, ideal_ms):
    """The Zero Bubble paper's bubble rate (§5.3): (cost - ideal) / cost, cost the largest span."""
    cost = span_ms(schedule)
    return (cost - ideal_ms) / cost


def long_run_step_ms(schedule, steps):
    """A step of a `steps`-step run: the first step's makespan, then the largest per-rank span
    per step (harness/search.h, RunStepNs)."""
    return (schedule["makespan_ms"] + (steps - 1) * span_ms(schedule)) / steps


def load1():
    """The 1-minute load average, as the benchmarks print it first."""
    try:
        return float(Path("/proc/loadavg").read_text().split()[0])
    except OSError:
        return float("nan")
