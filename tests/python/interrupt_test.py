"""Ctrl-C stops a long call: search, plan (its simulations and its refinement's search) and
simulate (the search that makes `auto`) each run in a child interpreter sent SIGINT once the call
has started; the child must report KeyboardInterrupt long before the call would have ended. The
bound is functional (a generous 10 s against calls of 30 s and more), not a timing benchmark."""

import os
import signal
import subprocess
import sys
import textwrap
import time
import unittest

from support import DATA, SCENARIOS

# The child: loads what it needs, says "ready", runs CALL and prints how it ended and after how
# long (monotonic seconds from the call's start).
CHILD = """
import sys, time
import stagecraft
uniform = stagecraft.Scenario.load({uniform!r}, {{"pipeline.microbatches": 16}})
tiny = stagecraft.Scenario.load({tiny!r})
print("ready", flush=True)
start = time.monotonic()
try:
    {call}
    print("returned", time.monotonic() - start, flush=True)
except KeyboardInterrupt:
    print("KeyboardInterrupt", time.monotonic() - start, flush=True)
"""

INTERRUPT_AFTER_S = 1.0  # into the call, so that it is running when the signal comes
BOUND_S = 10.0


class InterruptTest(unittest.TestCase):
    def interrupt(self, call):
        """Runs `call` in a child, sends SIGINT after INTERRUPT_AFTER_S; returns (how, seconds)."""
        code = CHILD.format(uniform=str(SCENARIOS / "uniform-costs.yaml"), tiny=str(DATA / "plan-tiny.yaml"),
                            call=call)
        child = subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)], stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True, env=os.environ)
        try:
            self.assertEqual(child.stdout.readline().strip(), "ready")
            time.sleep(INTERRUPT_AFTER_S)
            child.send_signal(signal.SIGINT)
            out, err = child.communicate(timeout=120)
        finally:
            if child.poll() is None:
                child.kill()
                child.wait()
        lines = out.split()
        self.assertEqual(len(lines), 2, f"stdout {out!r}, stderr {err!r}")
        return lines[0], float(lines[1])

    def assert_interrupted(self, call):
        how, seconds = self.interrupt(call)
        self.assertEqual(how, "KeyboardInterrupt", f"{call}: {how} after {seconds:.1f} s")
        self.assertLess(seconds, BOUND_S, call)

    def test_search(self):
        # The case: search(budget=30) answered Ctrl-C after 27 s.
        self.assert_interrupted("stagecraft.search(uniform, budget=30)")

    def test_plan_simulations(self):
        # Tens of thousands of configurations, each simulated (one thread: the loop, not the pool).
        self.assert_interrupted("stagecraft.plan(tiny, gpus=4, global_batch=4096, threads=1, refine=0, top=100000)")

    def test_plan_refinement(self):
        # One configuration, then the refinement's search of 10^8 moves.
        self.assert_interrupted("stagecraft.plan(tiny, gpus=2, global_batch=4, schedules=['1f1b', 'auto'], "
                                "recompute=['none'], partitions=['even'], threads=1, refine=1, "
                                "search_evaluations=10**8, refine_seconds=1e9)")

    def test_simulate_auto(self):
        # `auto` is searched before it is simulated: 10^8 moves.
        self.assert_interrupted("stagecraft.simulate(uniform.with_overrides({'pipeline.schedule': 'auto', "
                                "'pipeline.search_evaluations': 10**8}))")


if __name__ == "__main__":
    unittest.main()
