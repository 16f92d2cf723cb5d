#!/usr/bin/env python3
"""Predicted against measured for ranks that share a device, over several executions.

A machine shared with others drifts by tens of percent between two executions of the same
schedule, so one execution says little of the model. This report takes the prediction of
`stagecraft simulate --json` and the metrics of several `stagecraft execute --json` runs of the
same scenario and compares, per schedule, the predicted step time and bubble with the median of
the measured ones; it states the run-to-run spread beside them (how far apart the executions of
one schedule were), which bounds what any prediction can show, and issue 52's targets (median
|step error| <= 5%, largest <= 10%, |bubble error| <= 3 points).

Usage: scripts/shared_core_report.py PREDICTED.json MEASURED.json [MEASURED.json ...]
Exits 0 with the table (a benchmark: whatever the errors), 1 with one line on bad input.
"""
import json
import statistics
import sys

TARGET_MEDIAN_PCT = 5.0
TARGET_WORST_PCT = 10.0
TARGET_BUBBLE_PP = 3.0


class InputError(Exception):
    pass


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


def compare(predicted, measured_runs):
    """Rows (schedule, predicted ms, median ms, min ms, max ms, error %, predicted bubble %,
    median bubble %, bubble error pp, spread %) for every predicted schedule that every run measured."""
    rows = []
    for name, (step, bubble) in predicted.items():
        runs = [m[name] for m in measured_runs if name in m]
        if len(runs) != len(measured_runs):
            continue
        steps = [r[0] for r in runs]
        bubbles = [r[1] for r in runs]
        median = statistics.median(steps)
        median_bubble = statistics.median(bubbles)
        rows.append((name, step, median, min(steps), max(steps), 100 * (step / median - 1), 100 * bubble,
                     100 * median_bubble, 100 * (bubble - median_bubble), 100 * (max(steps) - min(steps)) / median))
    return rows


def summary(rows):
    """(median |error| %, largest |error| %, largest |bubble error| pp, median run-to-run spread %)."""
    errors = [abs(r[5]) for r in rows]
    return (statistics.median(errors), max(errors), max(abs(r[8]) for r in rows),
            statistics.median(r[9] for r in rows))


def main(argv):
    if len(argv) < 3:
        raise InputError("usage: scripts/shared_core_report.py PREDICTED.json MEASURED.json [MEASURED.json ...]")
    predicted = schedules_of(argv[1])
    measured = [schedules_of(p) for p in argv[2:]]
    rows = compare(predicted, measured)
    if not rows:
        raise InputError(f"{argv[1]}: no predicted schedule was measured in every run")
    print(f"{len(measured)} execution(s) against one prediction; measured = the median over them")
    print(f"{'schedule':<12} {'predicted':>10} {'measured':>10} {'range':>15} {'error':>8}"
          f" {'bubble pred':>11} {'measured':>9} {'error':>9} {'run-to-run':>10}")
    for name, step, median, lo, hi, err, pb, mb, berr, spread in rows:
        print(f"{name:<12} {step:>7.2f} ms {median:>7.2f} ms {lo:>6.1f}-{hi:<6.1f}ms {err:>+7.1f}%"
              f" {pb:>10.1f}% {mb:>8.1f}% {berr:>+6.1f} pp {spread:>9.1f}%")
    med, worst, bubble, spread = summary(rows)
    print(f"median |step error| {med:.1f}% (target {TARGET_MEDIAN_PCT:g}%), largest {worst:.1f}% "
          f"(target {TARGET_WORST_PCT:g}%), largest |bubble error| {bubble:.1f} pp (target {TARGET_BUBBLE_PP:g} pp); "
          f"run-to-run spread median {spread:.1f}%")
    met = med <= TARGET_MEDIAN_PCT and worst <= TARGET_WORST_PCT and bubble <= TARGET_BUBBLE_PP
    print("targets met" if met else "targets not met")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv))
    except InputError as e:
        print(f"shared_core_report: {e}", file=sys.stderr)
        sys.exit(1)
