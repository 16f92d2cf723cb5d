"""Times `stagecraft plan` on the 1T-parameter GPT on 3,072 A100s (scenarios/gpt-1t-3072xa100.yaml,
--gpus 3072 --global-batch 3072, the whole space) on every core of this machine, and prints its
counts from the plan's --json: configurations enumerated, rejected by kind, simulated. Target:
under 60 s on the 2-core development machine; exits 1 above it."""
import os
import tempfile
import time
from pathlib import Path

from . import common

TARGET_S = 60.0


def counts(plan):
    """The plan's counts in one line each, from its --json."""
    rejected = ", ".join(f"{n} {k}" for k, n in plan.get("rejected", {}).items() if n) or "none"
    return [f"configurations enumerated: {plan['enumerated']} over {plan['layouts']} layouts",
            f"rejected: {rejected}", f"simulated: {plan['simulated']} in {plan['seconds']:.1f} s on {plan['threads']} threads"]


def verdict(seconds, cores, target_s=TARGET_S):
    ok = seconds < target_s
    return f"plan on {cores} cores: {seconds:.1f} s wall (target < {target_s:g} s): {'ok' if ok else 'TOO SLOW'}", ok


def main(argv):
    parser = common.ArgumentParser(prog="plan-bench.sh", description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", default=str(common.SCENARIOS / "gpt-1t-3072xa100.yaml"))
    parser.add_argument("--gpus", default="3072")
    parser.add_argument("--global-batch", default="3072")
    args, plan_flags = parser.parse_known_args(argv)
    gpus, batch = common.positive_int(args.gpus, "--gpus"), common.positive_int(args.global_batch, "--global-batch")
    if not Path(args.scenario).is_file():
        raise common.usage_error(f"{args.scenario}: no such scenario")
    with tempfile.TemporaryDirectory() as tmp:
        start = time.monotonic()
        common.run([common.cli(), "plan", args.scenario, "--gpus", gpus, "--global-batch", batch, "--json",
                    f"{tmp}/plan.json", *plan_flags])
        seconds = time.monotonic() - start
        plan = common.read_json(f"{tmp}/plan.json")
    best = plan["configurations"][0] if plan["configurations"] else None
    lines = counts(plan)
    if best:
        lines.append(f"best: {best['layout']['schedule']} P{best['layout']['ranks']} D{best['layout']['data_parallel']} "
                     f"T{best['layout']['tensor_parallel']}, {best['metrics']['step_time_ms']:.3f} ms per step")
    line, ok = verdict(seconds, os.cpu_count())
    print("\n".join(lines + [line]))
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(common.entry("plan-bench", main))
