"""Where a measured run's per-op overhead goes (docs/accuracy.md, "What is off").

For each compute op of each rank of a trace (`stagecraft execute --trace`), the gap before it:
from the later of the previous compute op's end and the end of the RECV that fed it (the same
stage, microbatch and step; F by RECV_F, B and I by RECV_B) to its start, the time the bubble
split counts as overhead. The gaps are printed by op kind, and apart by whether one of the rank's
receives completed inside the gap: on the CPU backend a receive posted ahead completes in the
runtime's poll between two ops, and the receiving process copies the message out there.

Usage: scripts/trace-gaps.sh TRACE.json...
"""
import json
import statistics
from collections import defaultdict

from .common import ToolError, entry, usage_error

COMPUTE = ("F", "B", "I", "W", "STEP")


def gaps(path):
    """{kind: [gap us]}, {receives completed in the gap (0 or more): [gap us]}, ranks, steps."""
    try:
        with open(path) as fh:
            trace = json.load(fh)
        events = [e for e in (trace["traceEvents"] if isinstance(trace, dict) else trace) if e.get("ph") == "X"]
        by_rank = defaultdict(list)
        for e in events:
            a = e["args"]
            by_rank[e["pid"]].append((a["op_index"], a["kind"], a["stage"], a["microbatch"], a["step"],
                                      float(e["ts"]), float(e["dur"])))
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise ToolError(f"{path}: not a stagecraft trace ({err})")
    by_kind, by_receives = defaultdict(list), defaultdict(list)
    steps = 0
    for ops in by_rank.values():
        ops.sort()
        received = {}  # (consumer pass, stage, microbatch, step) -> the receive's end
        ends = []
        for _, kind, stage, mb, step, ts, dur in ops:
            if kind in ("RECV_F", "RECV_B"):
                received[(kind[-1], stage, mb, step)] = ts + dur
                ends.append(ts + dur)
            steps = max(steps, step + 1)
        previous_end = None
        for _, kind, stage, mb, step, ts, dur in ops:
            if kind not in COMPUTE:
                continue
            if previous_end is not None:
                fed = received.get(("F" if kind == "F" else "B", stage, mb, step)) if kind in ("F", "B", "I") else None
                ready = max(previous_end, fed if fed is not None else previous_end)
                if ts >= ready:
                    by_kind[kind].append(ts - ready)
                    by_receives[sum(1 for end in ends if ready < end <= ts)].append(ts - ready)
            previous_end = ts + dur
    return by_kind, by_receives, len(by_rank), steps


def main(argv):
    if not argv:
        raise usage_error("usage: scripts/trace-gaps.sh TRACE.json...")
    for path in argv:
        by_kind, by_receives, ranks, steps = gaps(path)
        if not by_kind:
            raise ToolError(f"{path}: no gap between two compute ops")
        every = [g for v in by_kind.values() for g in v]
        print(f"{path}: {len(every)} gaps over {ranks} rank(s) and {steps} step(s), mean {statistics.mean(every):.1f} us")
        print("  by the op after the gap: " + ", ".join(
            f"{k} {len(v)} x mean {statistics.mean(v):.1f} / median {statistics.median(v):.1f} us"
            for k, v in sorted(by_kind.items(), key=lambda kv: COMPUTE.index(kv[0]))))
        print("  by receives completed inside the gap: " + ", ".join(
            f"{n}: {len(v)} x mean {statistics.mean(v):.1f} us" for n, v in sorted(by_receives.items())))
        if by_receives.get(0) and any(n > 0 for n in by_receives):
            base = statistics.mean(by_receives[0])
            extra = sum(g - base for n, v in by_receives.items() if n > 0 for g in v)
            print(f"  beyond a gap without one: {extra / 1e3 / (ranks * steps):.3f} ms per rank and step")


if __name__ == "__main__":
    raise SystemExit(entry("trace-gaps", main))
