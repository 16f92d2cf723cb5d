"""Predicted against measured for ranks that share a device, over several rounds.

A machine shared with others drifts by tens of percent, between two executions and between the
profile and an execution (a profile timed while the machine was slow predicts every schedule
slow). So scripts/shared-core-check.sh runs several independent rounds, each a profile, its
prediction (`stagecraft simulate --json`) and an execution (`stagecraft execute --json`); this
report compares, per schedule, each round's prediction with its execution and holds the model to
the median over the rounds of the step-time and bubble errors. It states beside them the range
of the rounds' errors and how far apart the rounds' measured step times were (the machine's own
noise), and issue 52's targets (median |step error| <= 5%, largest <= 10%, |bubble error| <= 3
points, each schedule's error being its median over the rounds).

Usage: scripts/tool.sh shared_core ROUND_DIR [ROUND_DIR ...]   (each with predicted.json and
measured.json). Exits 0 with the table (a benchmark: whatever the errors), 1 with one line on
bad input.
"""
import json
import os
import statistics

from .common import ToolError as InputError, entry

TARGET_MEDIAN_PCT = 5.0
TARGET_WORST_PCT = 10.0
TARGET_BUBBLE_PP = 3.0


def schedules_of(path):
    """{schedule: (step_time_ms, bubble_fraction)} of a stagecraft metrics file."""
    try:
        with open(path) as f:
            doc = json.load(f)
        out = {}
        for s in doc["schedules"]:
            step, bubble = float(s["step_time_ms"]), float(s["bubble_fraction"])
            if step <= 0:
                raise InputError(f"{path}: schedule {s['schedule']}: step time {step} ms")
            out[str(s["schedule"])] = (step, bubble)
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise InputError(f"{path}: not a stagecraft metrics file ({type(e).__name__}: {e})") from None
    if not out:
        raise InputError(f"{path}: no schedules")
    return out


def compare(rounds):
    """`rounds`: [(predicted, measured)] as schedules_of gives them. Rows (schedule, median error %,
    lowest error %, highest error %, median bubble error pp, median measured ms, run-to-run %) for
    every schedule that every round predicted and measured, in the first round's order."""
    rows = []
    for name in rounds[0][0]:
        pairs = [(p[name], m[name]) for p, m in rounds if name in p and name in m]
        if len(pairs) != len(rounds):
            continue
        errors = [100 * (p[0] / m[0] - 1) for p, m in pairs]
        bubbles = [100 * (p[1] - m[1]) for p, m in pairs]
        steps = [m[0] for _, m in pairs]
        median_step = statistics.median(steps)
        rows.append((name, statistics.median(errors), min(errors), max(errors), statistics.median(bubbles),
                     median_step, 100 * (max(steps) - min(steps)) / median_step))
    return rows


def summary(rows):
    """(median |error| %, largest |error| %, largest |bubble error| pp, median run-to-run %)."""
    errors = [abs(r[1]) for r in rows]
    return statistics.median(errors), max(errors), max(abs(r[4]) for r in rows), statistics.median(r[6] for r in rows)


def main(argv):
    if not argv:
        raise InputError("usage: scripts/tool.sh shared_core ROUND_DIR [ROUND_DIR ...]")
    rounds = [(schedules_of(os.path.join(d, "predicted.json")), schedules_of(os.path.join(d, "measured.json")))
              for d in argv]
    rows = compare(rounds)
    if not rows:
        raise InputError(f"{argv[0]}: no schedule was predicted and measured in every round")
    print(f"{len(rounds)} round(s) of profile, prediction and execution; each error the median over them")
    print(f"{'schedule':<12} {'step error':>10} {'rounds':>16} {'bubble error':>12} {'measured':>10} {'run-to-run':>10}")
    for name, err, lo, hi, bubble, step, spread in rows:
        print(f"{name:<12} {err:>+9.1f}% {lo:>+7.1f}..{hi:<+7.1f} {bubble:>+9.1f} pp {step:>7.2f} ms {spread:>9.1f}%")
    med, worst, bubble, spread = summary(rows)
    print(f"median |step error| {med:.1f}% (target {TARGET_MEDIAN_PCT:g}%), largest {worst:.1f}% "
          f"(target {TARGET_WORST_PCT:g}%), largest |bubble error| {bubble:.1f} pp (target {TARGET_BUBBLE_PP:g} pp); "
          f"run-to-run spread median {spread:.1f}%")
    met = med <= TARGET_MEDIAN_PCT and worst <= TARGET_WORST_PCT and bubble <= TARGET_BUBBLE_PP
    print("targets met" if met else "targets not met")
    return 0


if __name__ == "__main__":
    raise SystemExit(entry("shared_core_report", main))
