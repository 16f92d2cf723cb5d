"""examples/choose_schedule.py as a user runs it: the sweep's table, the best schedule (checked
against the closed forms of the textbook scenario), its CSV for PyTorch, and the plot or the
note that matplotlib is missing."""

import importlib.util
import os
import subprocess
import sys
import unittest

from support import SCENARIOS, SOURCE_DIR, TempDirCase

import stagecraft

EXAMPLE = SOURCE_DIR / "examples" / "choose_schedule.py"


class ChooseScheduleTest(TempDirCase):
    def run_example(self, *args):
        done = subprocess.run([sys.executable, str(EXAMPLE), *map(str, args)], capture_output=True, text=True,
                              timeout=120, env=dict(os.environ))
        return done.returncode, done.stdout, done.stderr

    def test_sweep_uniform_costs(self):
        out = self.tmp / "best.csv"
        code, stdout, stderr = self.run_example(SCENARIOS / "uniform-costs.yaml", "--microbatches", "4,8", "--out", out)
        self.assertEqual(code, 0, stderr)
        rows = [line.split() for line in stdout.splitlines()[1:] if line.split()[-1] in ("no", "OOM")]
        # Every schedule `all` runs on 4 ranks at each count (dualpipe-v needs 8 microbatches).
        scenario = stagecraft.Scenario.load(SCENARIOS / "uniform-costs.yaml")
        expected = [(n, m) for m in (4, 8) for n in scenario.with_overrides({"pipeline.microbatches": m}).schedule_names()]
        self.assertIn(("dualpipe-v", 8), expected)
        self.assertNotIn(("dualpipe-v", 4), expected)
        self.assertEqual(sorted((r[0], int(r[1])) for r in rows), sorted(expected))
        # At uniform cost ZB-V's V placement leaves the least idle time, and more microbatches
        # fill the pipeline better: zb-v with 8 is the best (uniform-costs in README: 25.5 ms).
        self.assertIn("best: zb-v with 8 microbatches, 313.7 samples/s", stdout)
        s = stagecraft.Schedule.from_csv(out)
        self.assertEqual((s.ranks, s.chunks, s.placement, s.microbatches), (4, 2, "v", 8))
        self.assertEqual(s.to_csv(), stagecraft.schedule("zb-v", 4, 8, 2).to_csv())
        plot = self.tmp / "best.png"
        if importlib.util.find_spec("matplotlib") is None:
            self.assertIn("matplotlib is not installed: no plot", stdout)
            self.assertFalse(plot.exists())
        else:
            self.assertTrue(plot.stat().st_size > 0)

    def test_bad_input(self):
        code, _, stderr = self.run_example(SCENARIOS / "uniform-costs.yaml", "--set", "pipeline.ranks=0",
                                           "--out", self.tmp / "x.csv")
        self.assertEqual(code, 1)
        self.assertTrue(stderr.startswith("choose_schedule: error: Scenario.load: overrides: pipeline.ranks"), stderr)
        self.assertFalse((self.tmp / "x.csv").exists())


if __name__ == "__main__":
    unittest.main()
