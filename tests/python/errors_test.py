"""The module's error contract, call by call (docs/python.md, "Errors"): a value of the wrong type
(None, a str for a number, a bool for an int) is a TypeError, a bad value (a negative count, an
int past what the C++ code takes, nan or inf, an empty string) an InputError; both name the call
and the argument as Python spells them, never a command-line flag. Outputs are written as the
command writes them (base/output_file.h)."""

import math
import os
import stat
import unittest

import support  # noqa: F401  (puts build/python on the path when run by hand)
from support import DATA, SCENARIOS, TempDirCase, cli_error_line

import stagecraft

UNIFORM = SCENARIOS / "uniform-costs.yaml"
TINY = DATA / "plan-tiny.yaml"
HUGE = 2**70  # past every C++ integer type
PAST_INT32 = 2**31
FLAG = "--"  # no message of the module names a command-line flag


class Contract(TempDirCase):
    """assert_type / assert_value: the call fails with TypeError / InputError and the message
    starts with `prefix` (the call and the argument)."""

    @classmethod
    def setUpClass(cls):
        cls.uniform = stagecraft.Scenario.load(UNIFORM)
        cls.tiny = stagecraft.Scenario.load(TINY)

    def assert_type(self, prefix, call):
        with self.assertRaises(TypeError) as caught:
            call()
        self.assertNotIsInstance(caught.exception, stagecraft.InputError)
        self.assertTrue(str(caught.exception).startswith(prefix), f"{caught.exception!r} does not start with {prefix!r}")
        return caught.exception

    def assert_value(self, prefix, call):
        with self.assertRaises(stagecraft.InputError) as caught:
            call()
        e = caught.exception
        self.assertTrue(str(e).startswith(prefix), f"{e!r} does not start with {prefix!r}")
        self.assertNotIn(FLAG, str(e))
        self.assertIsNone(e.file)
        return e


class ScenarioArgumentsTest(Contract):
    def test_simulate(self):
        for bad in (None, str(UNIFORM), UNIFORM, {"name": "x"}):
            with self.subTest(scenario=bad):
                self.assert_type("simulate: scenario: expected a stagecraft.Scenario", lambda: stagecraft.simulate(bad))
        for bad in (True, 1.5, "5", None):
            with self.subTest(max_ops=bad):
                self.assert_type("simulate: max_ops: expected an integer", lambda: stagecraft.simulate(self.uniform, bad))
        for bad in (0, -1, HUGE, stagecraft.MAX_MAX_OPS + 1):
            with self.subTest(max_ops=bad):
                e = self.assert_value("simulate: max_ops: expected an integer in [1, ",
                                      lambda: stagecraft.simulate(self.uniform, bad))
                self.assertEqual(e.argument, "max_ops")
        # The estimate's refusal names the argument, not --max-ops.
        e = self.assert_value("gpipe with 4 ranks", lambda: stagecraft.simulate(self.uniform, max_ops=10))
        self.assertTrue(str(e).endswith("raise it with max_ops=N"), str(e))

    def test_scenario_loading(self):
        self.assert_type("Scenario.load: path: expected a path", lambda: stagecraft.Scenario.load(None))
        self.assert_value("Scenario.load: path: expected a path, got an empty file name",
                          lambda: stagecraft.Scenario.load(""))
        for bad in (3, "pipeline.ranks=2", [3], {1: 2}):
            with self.subTest(overrides=bad):
                self.assert_type("Scenario.load: overrides: expected", lambda: stagecraft.Scenario.load(UNIFORM, bad))
        self.assert_type("Scenario.from_yaml: text: expected a str", lambda: stagecraft.Scenario.from_yaml(None))
        self.assert_type("Scenario.from_dict: data: expected a dict", lambda: stagecraft.Scenario.from_dict([1]))
        self.assert_type("Scenario.from_dict: data: ", lambda: stagecraft.Scenario.from_dict({"name": object()}))
        self.assert_value("Scenario.from_dict: path: ", lambda: stagecraft.Scenario.from_dict({"name": "x"}, path=""))
        # An override's error names the argument the way the command names --set.
        line = cli_error_line("simulate", UNIFORM, "--set", "pipeline.microbatches=-3")
        e = self.assert_value("Scenario.load: overrides: pipeline.microbatches: ",
                              lambda: stagecraft.Scenario.load(UNIFORM, {"pipeline.microbatches": -3}))
        self.assertEqual(f"stagecraft: error: Scenario.load: {e}".replace("Scenario.load: Scenario.load: overrides: ",
                                                                           "--set "), line)
        self.assertEqual(e.argument, "overrides")
        self.assert_value("Scenario.with_overrides: overrides: pipeline.ranks: ",
                          lambda: self.uniform.with_overrides({"pipeline.ranks": 0}))


class ScheduleArgumentsTest(Contract):
    def test_schedule(self):
        self.assert_type("schedule: name: expected", lambda: stagecraft.schedule(None, 2, 4))
        self.assert_value("schedule: name: expected a generator's name, got ''", lambda: stagecraft.schedule("", 2, 4))
        for arg in ("ranks", "microbatches", "chunks", "steps", "data_parallel"):
            args = {"name": "1f1b", "ranks": 2, "microbatches": 4}
            for bad in (True, 2.0, "2", None):
                if arg == "chunks" and bad is None:
                    continue  # None: the schedule's own chunks
                with self.subTest(arg=arg, value=bad):
                    self.assert_type(f"schedule: {arg}: expected an integer",
                                     lambda: stagecraft.schedule(**dict(args, **{arg: bad})))
            for bad in (0, -1, PAST_INT32, HUGE):
                with self.subTest(arg=arg, value=bad):
                    self.assert_value(f"schedule: {arg}: expected an integer in [1, 2147483647], got {bad}",
                                      lambda: stagecraft.schedule(**dict(args, **{arg: bad})))
        # chunks None (the default) is the schedule's own: 2 for zb-v, 1 for 1f1b.
        self.assertEqual(stagecraft.schedule("zb-v", 2, 4).chunks, 2)
        self.assertEqual(stagecraft.schedule("1f1b", 2, 4, chunks=None).chunks, 1)
        self.assert_type("schedule: recompute: expected True or False", lambda: stagecraft.schedule("1f1b", 2, 4, recompute=None))
        self.assert_value("schedule: max_ops: ", lambda: stagecraft.schedule("1f1b", 2, 4, max_ops=-1))

    def test_schedule_methods(self):
        s = stagecraft.schedule("1f1b", ranks=2, microbatches=4)
        self.assert_value("lower: buffers: expected an integer in [1, ", lambda: s.lower(buffers=0))
        self.assert_value("lower: buffers: ", lambda: s.lower(buffers=HUGE))
        self.assert_value("lower: p2p: expected ahead or lockstep, got 'x'", lambda: s.lower(p2p="x"))
        self.assert_value("lower: p2p: expected ahead or lockstep, got ''", lambda: s.lower(p2p=""))
        self.assert_type("to_csv: p2p: ", lambda: s.to_csv(p2p=None))
        self.assert_type("to_csv: comms: expected True or False", lambda: s.to_csv(comms="yes"))
        self.assert_type("to_json: p2p: ", lambda: s.to_json(p2p=1))
        # Stage 99 of 2 stages, or a negative one, had a rank made up for it.
        self.assert_value("rank_of: stage: expected an integer in [0, 1], got 99", lambda: s.rank_of(99))
        self.assert_value("rank_of: stage: ", lambda: s.rank_of(-1))
        self.assertEqual(s.rank_of(1), 1)
        op = s.ops[0][0]
        self.assert_value("action: microbatches_per_step: expected an integer in [1, ", lambda: op.action(0))
        self.assertEqual(op.action(4), "0F0")
        # The grid's limit points at the other forms by their Python names.
        wide = stagecraft.schedule("gpipe", ranks=2, microbatches=3000)
        e = self.assert_value("", wide.grid)
        self.assertIn("to_csv() or to_json()", str(e))

    def test_from_csv(self):
        fixture = DATA / "csv" / "gpipe_3x3.csv"
        self.assert_type("Schedule.from_csv: source: expected a path", lambda: stagecraft.Schedule.from_csv(None))
        self.assert_value("Schedule.from_csv: source: ", lambda: stagecraft.Schedule.from_csv(""))
        self.assert_value("Schedule.from_csv: chunks: ", lambda: stagecraft.Schedule.from_csv(fixture, chunks=-1))
        self.assert_value("Schedule.from_csv: chunks: ", lambda: stagecraft.Schedule.from_csv(fixture, chunks=0))
        self.assert_value("Schedule.from_csv: microbatches: ", lambda: stagecraft.Schedule.from_csv(fixture, microbatches=-1))
        self.assert_value("Schedule.from_csv: steps: ", lambda: stagecraft.Schedule.from_csv(fixture, steps=HUGE))
        self.assert_value("Schedule.from_csv: weights: expected flush, stash, 2bw or nostash, got 'x'",
                          lambda: stagecraft.Schedule.from_csv(fixture, weights="x"))
        self.assert_value("Schedule.from_csv: name: ", lambda: stagecraft.Schedule.from_csv(fixture, name=""))
        self.assert_type("Schedule.from_csv: validate: ", lambda: stagecraft.Schedule.from_csv(fixture, validate=None))


class PlanArgumentsTest(Contract):
    def plan(self, **changes):
        args = dict(gpus=4, global_batch=8, schedules=["1f1b"], recompute=["none"], partitions=["even"], threads=1,
                    refine=0)
        args.update(changes)
        return stagecraft.plan(self.tiny, **args)

    def test_the_layout_plan_replaces_is_not_checked(self):
        # Issue 51 item 8 from Python: one layer cannot fill mlp-cpu's interleaved stages, but plan
        # replaces the layout; Scenario.load refuses the scenario, load_for_plan reads it for plan
        # alone, and simulate refuses what it read.
        mlp, one = SCENARIOS / "mlp-cpu.yaml", {"model.mlp.layers": 1}
        self.assert_value("Scenario.load: ", lambda: stagecraft.Scenario.load(mlp, one))
        s = stagecraft.Scenario.load_for_plan(mlp, one)
        p = stagecraft.plan(s, gpus=2, global_batch=2, threads=1, refine=0)
        self.assertGreater(len(p.configurations), 0)
        self.assert_value("simulate: scenario: loaded by Scenario.load_for_plan", lambda: stagecraft.simulate(s))
        self.assert_value("simulate: scenario: loaded by Scenario.load_for_plan",
                          lambda: stagecraft.simulate(s.with_overrides({"pipeline.microbatches": 4})))

    def test_types(self):
        self.assert_type("plan: scenario: expected a stagecraft.Scenario", lambda: stagecraft.plan(None, 4, 8))
        self.assert_type("plan: scenario: expected a stagecraft.Scenario (Scenario.load(path) reads a file)",
                         lambda: stagecraft.plan(str(TINY), 4, 8))
        for arg in ("gpus", "global_batch", "max_microbatch_size", "max_chunks", "top", "threads", "refine",
                    "search_evaluations", "max_ops"):
            for bad in (True, 1.0, "1", None):
                with self.subTest(arg=arg, value=bad):
                    self.assert_type(f"plan: {arg}: expected an integer", lambda: self.plan(**{arg: bad}))
        for bad in (None, "20", True):
            with self.subTest(refine_seconds=bad):
                self.assert_type("plan: refine_seconds: expected a number of seconds",
                                 lambda: self.plan(refine_seconds=bad))
        self.assert_type("plan: schedules: expected a list", lambda: self.plan(schedules="1f1b"))
        self.assert_type("plan: schedules: expected a non-empty string", lambda: self.plan(schedules=[None]))
        self.assert_type("plan: tensor_parallel: expected an integer", lambda: self.plan(tensor_parallel=["2"]))
        self.assert_type("plan: context_parallel: expected an integer", lambda: self.plan(context_parallel=["2"]))
        self.assert_type("plan: memory_limit: expected an integer", lambda: self.plan(memory_limit=1.5))

    def test_values(self):
        # The cases, which ran: max_ops=-1, refine=-1, refine_seconds=nan.
        e = self.assert_value(f"plan: max_ops: expected an integer in [0, {stagecraft.MAX_MAX_OPS}] (0: the default), got -1",
                              lambda: self.plan(max_ops=-1))
        self.assertEqual(e.argument, "max_ops")
        self.assert_value("plan: refine: expected an integer in [0, 2147483647] (0: none), got -1",
                          lambda: self.plan(refine=-1))
        for bad in (math.nan, math.inf, -1.0):
            with self.subTest(refine_seconds=bad):
                self.assert_value("plan: refine_seconds: expected a number of seconds at least 0, got ",
                                  lambda: self.plan(refine_seconds=bad))
        self.assert_value("plan: gpus: expected an integer in [1, 2147483647], got 1099511627776",
                          lambda: self.plan(gpus=2**40))
        self.assert_value("plan: global_batch: ", lambda: self.plan(global_batch=HUGE))
        self.assert_value("plan: global_batch: ", lambda: self.plan(global_batch=0))
        self.assert_value("plan: top: ", lambda: self.plan(top=0))
        self.assert_value("plan: search_evaluations: ", lambda: self.plan(search_evaluations=-1))
        self.assert_value("plan: max_microbatch_size: ", lambda: self.plan(max_microbatch_size=-1))
        self.assert_value("plan: tensor_parallel: ", lambda: self.plan(tensor_parallel=[0]))
        self.assert_value("plan: context_parallel: ", lambda: self.plan(context_parallel=[0]))
        self.assert_value("plan: zero: expected an integer in [0, 3], got 4", lambda: self.plan(zero=[4]))
        self.assert_value("plan: schedules: expected a non-empty string, got ''", lambda: self.plan(schedules=[""]))
        self.assert_value("plan: memory_limit: ", lambda: self.plan(memory_limit=0))
        self.assert_value("plan: memory_limit: ", lambda: self.plan(memory_limit=""))
        self.assert_value("plan: memory_limit: ", lambda: self.plan(memory_limit="lots"))
        self.assert_value("plan: recompute: 'some' is not one of none, selective, full",
                          lambda: self.plan(recompute=["some"]))

    def test_threads_are_bounded(self):
        # 1000 threads took the interpreter down; the bound is the harness's (harness/plan.h).
        self.assertGreaterEqual(stagecraft.MAX_PLAN_THREADS, 4)  # 4 per core, at most 256
        self.assertLessEqual(stagecraft.MAX_PLAN_THREADS, 256)
        e = self.assert_value(f"plan: threads: expected an integer in [0, {stagecraft.MAX_PLAN_THREADS}] "
                              "(0: every core), got 1000", lambda: self.plan(threads=1000))
        self.assertEqual(e.argument, "threads")
        self.assert_value("plan: threads: ", lambda: self.plan(threads=-1))

    def test_the_harness_checks_name_the_arguments(self):
        # What only the harness knows, in Python's words: --gpus 5 is gpus=5, --max-chunks max_chunks.
        line = cli_error_line("plan", TINY, "--gpus", 5, "--global-batch", 8)
        self.assertTrue(line.startswith("stagecraft: error: --gpus 5: "), line)
        e = self.assert_value("plan: gpus=5: ", lambda: self.plan(gpus=5))
        self.assertEqual(str(e), "plan: gpus=5: " + line[len("stagecraft: error: --gpus 5: "):])
        self.assertEqual(e.argument, "gpus")
        self.assert_value("plan: max_chunks: expected from 2 to 1024, got 1", lambda: self.plan(max_chunks=1))
        self.assert_value("plan: schedules: unknown schedule 'nope'", lambda: self.plan(schedules=["nope"]))

    def test_report(self):
        p = self.plan()
        self.assert_value("report: top: ", lambda: p.report(-1))
        self.assert_value("report: top: ", lambda: p.report(HUGE))
        self.assert_type("report: top: ", lambda: p.report("3"))


class PlanOutputsTest(Contract):
    """write_best and write_plot write as `plan --write-best` and `--plot` do."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.result = stagecraft.plan(cls.tiny, gpus=4, global_batch=8, schedules=["1f1b"], threads=1, refine=0)

    def test_refused_paths_leave_nothing(self):
        for write, name in ((self.result.write_best, "write_best"), (self.result.write_plot, "write_plot")):
            with self.subTest(call=name):
                e = self.assert_value(f"{name}: path {self.tmp}: cannot write: is a directory", lambda: write(self.tmp))
                self.assertEqual(os.listdir(self.tmp), [])
                self.assert_value(f"{name}: path {self.tmp}/no/out: cannot write: folder {self.tmp}/no: no such file or "
                                  "directory",
                                  lambda: write(self.tmp / "no" / "out"))
                self.assert_value(f"{name}: path: expected a path, got an empty file name", lambda: write(""))
                self.assert_type(f"{name}: path: expected a path", lambda: write(None))
                self.assertEqual(os.listdir(self.tmp), [])
                del e

    def test_replaces_atomically_keeping_the_mode(self):
        best = self.tmp / "best.yaml"
        best.write_text("old\n")
        best.chmod(0o640)
        link = self.tmp / "link.yaml"
        link.symlink_to(best)
        self.result.write_best(link)
        self.assertTrue(link.is_symlink())
        self.assertEqual(best.read_text(), self.result.best_scenario_text())
        self.assertEqual(stat.S_IMODE(best.stat().st_mode), 0o640)
        self.result.write_plot(self.tmp / "front.png")
        self.assertEqual((self.tmp / "front.png").read_bytes()[1:4], b"PNG")
        self.assertEqual(sorted(os.listdir(self.tmp)), ["best.yaml", "front.png", "link.yaml"])  # no temporary left


class SearchArgumentsTest(Contract):
    def search(self, **changes):
        args = dict(memory_limit="2p", evaluations=5, seed=1)
        args.update(changes)
        return stagecraft.search(self.uniform, **args)

    def test_types(self):
        self.assert_type("search: scenario: ", lambda: stagecraft.search(None))
        for bad in ("1", None, True):
            with self.subTest(budget=bad):
                self.assert_type("search: budget: expected a number of seconds", lambda: self.search(budget=bad))
        self.assert_type("search: evaluations: expected an integer", lambda: self.search(evaluations=5.0))
        self.assert_type("search: seed: expected an integer", lambda: self.search(seed=True))
        self.assert_type("search: from_: expected a generator's name", lambda: self.search(from_=1))

    def test_values(self):
        for bad in (math.nan, math.inf, -1, stagecraft.MAX_SEARCH_BUDGET_SECONDS + 1):
            with self.subTest(budget=bad):
                self.assert_value("search: budget: expected a number of seconds in [0, 86400], got ",
                                  lambda: self.search(budget=bad))
        self.assert_value("search: budget: expected a number of seconds in (0, 86400], got 0",
                          lambda: self.search(budget=0))
        self.assert_value("search: evaluations: expected an integer in [1, ", lambda: self.search(evaluations=0))
        self.assert_value("search: seed: expected an integer in [0, 18446744073709551615], got -1",
                          lambda: self.search(seed=-1))
        self.assert_value("search: seed: ", lambda: self.search(seed=2**64))
        self.assertEqual(self.search(seed=2**64 - 1).best.validate(), [])
        self.assert_value("search: from_: expected a generator's name, got ''", lambda: self.search(from_=""))
        e = self.assert_value("search: from_=nope: no such generator", lambda: self.search(from_="nope"))
        self.assertEqual(e.argument, "from_")
        self.assert_value("search: memory_limit: ", lambda: self.search(memory_limit="lots"))
        self.assert_value("search: memory_limit: ", lambda: self.search(memory_limit=-5))


class RunArgumentsTest(Contract):
    def test_files(self):
        for read, name in ((stagecraft.read_run, "read_run"), (stagecraft.read_trace, "read_trace")):
            with self.subTest(call=name):
                self.assert_type(f"{name}: path: expected a path", lambda: read(None))
                self.assert_type(f"{name}: path: expected a path", lambda: read(3))
                self.assert_value(f"{name}: path: expected a path, got an empty file name", lambda: read(""))

    def test_run_find(self):
        run = stagecraft.read_run(DATA / "compare" / "predicted.json")
        self.assert_type("find: schedule: expected a schedule's name", lambda: run.find(None))
        self.assertIsNone(run.find("none-such"))

    def test_compare(self):
        pred, meas = DATA / "compare" / "predicted.json", DATA / "compare" / "measured.json"
        self.assert_type("compare: predicted: ", lambda: stagecraft.compare(None, meas))
        self.assert_type("compare: measured: ", lambda: stagecraft.compare(pred, 3))
        self.assert_value("compare: predicted: ", lambda: stagecraft.compare("", meas))
        self.assert_type("compare: max_error: expected a percentage", lambda: stagecraft.compare(pred, meas, max_error=True))
        for bad in (math.nan, math.inf, -1):
            with self.subTest(max_error=bad):
                self.assert_value("compare: max_error: ", lambda: stagecraft.compare(pred, meas, max_error=bad))
        self.assert_value("compare: trace: ", lambda: stagecraft.compare(pred, meas, trace=""))

    def test_results(self):
        runs = stagecraft.simulate(stagecraft.Scenario.load(UNIFORM, {"pipeline.schedule": "1f1b"}))
        self.assert_value("metrics_json: results: expected at least one", lambda: stagecraft.metrics_json([]))
        self.assert_type("metrics_json: results: expected a list", lambda: stagecraft.metrics_json(None))
        self.assert_type("metrics_json: results: ", lambda: stagecraft.metrics_json([1]))
        self.assert_type("to_pandas: results: ", lambda: stagecraft.to_pandas([None]))
        self.assert_value("memory_terms: rank: expected an integer in [0, 3], got 4", lambda: runs[0].memory_terms(4))
        self.assert_value("memory_terms: rank: ", lambda: runs[0].memory_terms(HUGE))
        self.assert_type("memory_terms: rank: ", lambda: runs[0].memory_terms(None))


if __name__ == "__main__":
    unittest.main()
