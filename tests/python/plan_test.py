"""`stagecraft.plan` against `stagecraft plan`: the same configurations and metrics, the same
report, the same best scenario, the same error lines; and the hand-worked space of 4 devices on
nodes of 2 for a batch of 8 (T in {1, 2, 4}: 6 layouts, T = 4 leaves the node)."""

import json
import shutil
import unittest

import stagecraft
from support import DATA, SCENARIOS, TempDirCase, cli_error_line, run_cli



def without_timing(value):
    """The plan's JSON without what depends on the clock or the threads' order."""
    if isinstance(value, dict):
        return {k: without_timing(v) for k, v in value.items() if k not in ("seconds", "threads")}
    if isinstance(value, list):
        return [without_timing(v) for v in value]
    return value


class PlanTest(TempDirCase):
    def setUp(self):
        super().setUp()
        self.tiny = self.tmp / "tiny.yaml"
        shutil.copy(DATA / "plan-tiny.yaml", self.tiny)

    def test_hand_worked_space(self):
        p = stagecraft.plan(stagecraft.Scenario.load(self.tiny), gpus=4, global_batch=8, schedules=["1f1b"],
                            recompute=["none"], partitions=["even"], top=100)
        self.assertEqual(p.layouts, 6)
        self.assertEqual(p.layouts_rejected["topology"], 1)
        self.assertEqual(p.enumerated, 24)
        self.assertEqual(len(p.configurations), 24)
        self.assertIsNotNone(p.best)
        self.assertEqual(p.best.rank, 1)
        # The best is the fastest fitting one, and simulate gives it the same step.
        fitting = [c.metrics.step_time_ms for c in p.configurations if c.fits]
        self.assertEqual(p.best.metrics.step_time_ms, min(fitting))
        again = stagecraft.simulate(stagecraft.Scenario.load(self.tiny, p.best.overrides()))[0]
        self.assertAlmostEqual(again.step_time_ms, p.best.metrics.step_time_ms, places=6)
        front = p.pareto
        self.assertTrue(front)
        for a, b in zip(front, front[1:]):  # memory up, throughput strictly up
            self.assertLess(a.metrics.throughput_samples_per_s, b.metrics.throughput_samples_per_s)

    def test_same_as_the_command(self):
        scenario = SCENARIOS / "gpt-1.3b-8xh100.yaml"
        flags = ["--gpus", 8, "--global-batch", 32, "--threads", 1, "--refine", 1, "--search-evaluations", 100]
        _, out, _ = run_cli("plan", scenario, *flags, "--json", self.tmp / "plan.json",
                            "--write-best", self.tmp / "best.yaml")
        p = stagecraft.plan(stagecraft.Scenario.load(scenario), gpus=8, global_batch=32, threads=1, refine=1,
                            search_evaluations=100)
        self.assertEqual(without_timing(json.loads(p.to_json())),
                         without_timing(json.loads((self.tmp / "plan.json").read_text())))
        self.assertEqual(p.best_scenario_text(), (self.tmp / "best.yaml").read_text())
        # The report, less the lines that time the run.
        def steady(text):
            return [line for line in text.splitlines() if " s on " not in line and not line.startswith("wrote ")]
        self.assertEqual(steady(p.report()), steady(out))
        p.write_plot(self.tmp / "front.png")
        self.assertEqual((self.tmp / "front.png").read_bytes()[1:4], b"PNG")

    def test_bad_input_is_the_commands_line(self):
        # The command's line, with the flag put as the argument (--gpus 5 is gpus=5).
        scenario = stagecraft.Scenario.load(self.tiny)
        line = cli_error_line("plan", self.tiny, "--gpus", 5, "--global-batch", 8)
        with self.assertRaises(stagecraft.InputError) as caught:
            stagecraft.plan(scenario, gpus=5, global_batch=8)
        self.assertEqual(f"stagecraft: error: {caught.exception}",
                         line.replace("stagecraft: error: --gpus 5:", "stagecraft: error: plan: gpus=5:"))
        with self.assertRaisesRegex(stagecraft.InputError,
                                    "^plan: recompute: 'some' is not one of none, selective, full$"):
            stagecraft.plan(scenario, gpus=4, global_batch=8, recompute=["some"])
        with self.assertRaisesRegex(stagecraft.InputError, "^plan: memory_limit: "):
            stagecraft.plan(scenario, gpus=4, global_batch=8, memory_limit="lots")
        # ZeRO 0-3 as the command's --zero takes them: ZeRO-2 plans as `plan --zero 2` does.
        with self.assertRaisesRegex(stagecraft.InputError, r"^plan: zero: expected an integer in \[0, 3\], got 4$"):
            stagecraft.plan(scenario, gpus=4, global_batch=8, zero=[4])
        run_cli("plan", self.tiny, "--gpus", 4, "--global-batch", 8, "--schedules", "1f1b", "--threads", 1,
                "--refine", 0, "--zero", 2, "--json", self.tmp / "zero2.json")
        zero2 = stagecraft.plan(scenario, gpus=4, global_batch=8, schedules=["1f1b"], threads=1, refine=0, zero=[2])
        self.assertEqual(without_timing(json.loads(zero2.to_json())),
                         without_timing(json.loads((self.tmp / "zero2.json").read_text())))
        self.assertIn(2, {c.layout["zero"] for c in zero2.configurations})

    def test_context_parallelism_as_the_command(self):
        # Fused attention over 512 tokens: C = 2 asked (4 chunks of 128), the same configurations
        # as `plan --context-parallel 2`, each of the 4 devices' P x D x T x C.
        sets = {"model.transformer.attention": "flash"}
        flags = ["--gpus", 4, "--global-batch", 8, "--schedules", "1f1b", "--threads", 1, "--refine", 0,
                 "--context-parallel", 2, "--set", "model.transformer.attention=flash"]
        run_cli("plan", self.tiny, *flags, "--json", self.tmp / "plan.json")
        p = stagecraft.plan(stagecraft.Scenario.load(self.tiny, sets), gpus=4, global_batch=8, schedules=["1f1b"],
                            threads=1, refine=0, context_parallel=[2])
        self.assertEqual(without_timing(json.loads(p.to_json())),
                         without_timing(json.loads((self.tmp / "plan.json").read_text())))
        self.assertEqual(json.loads(p.to_json())["context_parallel"], [2])
        self.assertEqual(p.context_parallel, [2])
        self.assertTrue(p.configurations)
        for c in p.configurations:
            self.assertEqual(c.layout["context_parallel"], 2)
            self.assertEqual(c.layout["ranks"] * c.layout["data_parallel"] * c.layout["tensor_parallel"] * 2, 4)
        again = stagecraft.simulate(stagecraft.Scenario.load(self.tiny, {**sets, **p.best.overrides()}))[0]
        self.assertAlmostEqual(again.step_time_ms, p.best.metrics.step_time_ms, places=6)
        # A C the model cannot take (unfused attention) is the command's line.
        line = cli_error_line("plan", self.tiny, "--gpus", 4, "--global-batch", 8, "--context-parallel", 2)
        with self.assertRaises(stagecraft.InputError) as caught:
            stagecraft.plan(stagecraft.Scenario.load(self.tiny), gpus=4, global_batch=8, context_parallel=[2])
        self.assertEqual(f"stagecraft: error: {caught.exception}",
                         line.replace("stagecraft: error: --context-parallel 2:",
                                      "stagecraft: error: plan: context_parallel=2:"))
        self.assertIn("attention: flash", line)

if __name__ == "__main__":
    unittest.main()
