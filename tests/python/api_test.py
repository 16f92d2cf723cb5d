"""The Python API against oracles from outside it: the papers' closed forms on the textbook
scenario, PyTorch's CSV fixtures, hand-computed comparison errors (tests/data/compare), and the
metrics codec's own keys against the documented attributes."""

import ast
import json
import threading
import unittest
from pathlib import Path

import support  # noqa: F401  (puts build/python on the path when run by hand)
from support import DATA, SCENARIOS, TempDirCase

import stagecraft

UNIFORM = SCENARIOS / "uniform-costs.yaml"


class ScenarioTest(TempDirCase):
    def test_load_with_overrides(self):
        s = stagecraft.Scenario.load(UNIFORM, {"pipeline.microbatches": 16, "pipeline.schedule": ["gpipe", "1f1b"]})
        self.assertEqual((s.name, s.ranks, s.microbatches), ("uniform-costs", 4, 16))
        self.assertEqual(s.schedules, ["gpipe", "1f1b"])
        self.assertEqual(s.overrides, ["pipeline.microbatches=16", 'pipeline.schedule=["gpipe", "1f1b"]'])
        self.assertEqual(stagecraft.Scenario.load(UNIFORM, ["pipeline.ranks=2"]).ranks, 2)

    def test_from_dict_is_the_yaml(self):
        data = {
            "name": "two-ranks",
            "topology": {"device": {"name": "ideal", "peak": "1PFLOPS", "memory": "80GiB"}, "nodes": 1,
                         "devices_per_node": 2, "links": [{"scope": "node", "bandwidth": "1TB/s", "latency": 0}]},
            "model": {"costs": {"forward": "1ms", "backward_input": "1ms", "backward_weight": "1ms",
                                "activation_bytes": "1MiB", "weight_bytes": "1GiB"}},
            "pipeline": {"schedule": "gpipe", "ranks": 2, "microbatches": 4},
        }
        s = stagecraft.Scenario.from_dict(data)
        (run,) = stagecraft.simulate(s)
        # GPipe at uniform cost: (m + p - 1) (F + B) = 5 x 3 ms, bubble (p-1)/(m+p-1) = 1/5.
        self.assertEqual(run.step_time_ms, 15.0)
        self.assertAlmostEqual(run.bubble_fraction, 0.2, places=9)
        self.assertEqual(stagecraft.simulate(s.with_overrides({"pipeline.microbatches": 8}))[0].step_time_ms, 27.0)

    def test_node_groups_per_rank(self):
        # The shipped mixed cluster: ranks 0-3 on the H100 node, 4-7 on the A100 node, each held
        # against its own device's memory (the device library's 80 GiB, and 40 GiB by --set).
        s = stagecraft.Scenario.load(SCENARIOS / "gpt-1.3b-h100-a100.yaml",
                                     ["topology.groups.1.device.memory=40GiB"])
        self.assertEqual(s.rank_devices, ["H100-SXM"] * 4 + ["A100-SXM-80GB"] * 4)
        self.assertEqual(s.rank_memory_bytes, [80 << 30] * 4 + [40 << 30] * 4)
        self.assertEqual((s.device, s.device_memory_bytes), ("H100-SXM", 80 << 30))
        runs = {r.schedule: r for r in stagecraft.simulate(s)}
        # The A100 stages are the slower: each of their forwards takes longer than an H100 stage's.
        one = runs["1f1b"]
        self.assertEqual(len(one.stages), 8)
        self.assertGreater(min(c.forward_ms for c in one.stages[4:]), max(c.forward_ms for c in one.stages[:4]))

    def test_errors_say_where(self):
        with self.assertRaises(stagecraft.InputError) as caught:
            stagecraft.Scenario.from_dict({"name": "x", "pipeline": {"ranks": "two"}})
        e = caught.exception
        self.assertIsInstance(e, ValueError)
        self.assertEqual(e.file, "<dict>")
        self.assertIsInstance(e.line, int)
        self.assertIsInstance(e.column, int)
        self.assertTrue(str(e).startswith(f"<dict>:{e.line}:{e.column}: "), str(e))
        with self.assertRaises(stagecraft.InputError) as caught:
            stagecraft.Scenario.load(self.tmp / "missing.yaml")
        self.assertEqual(caught.exception.file, str(self.tmp / "missing.yaml"))
        self.assertIsNone(caught.exception.line)
        with self.assertRaises(stagecraft.InputError) as caught:
            stagecraft.Scenario.load(UNIFORM, {"pipeline.microbatches": 0})
        self.assertIn("pipeline.microbatches", str(caught.exception))
        self.assertIsNone(caught.exception.file)  # it came from an override, not from a file
        with self.assertRaises(TypeError):
            stagecraft.Scenario.load(UNIFORM, "pipeline.ranks=2")


class SimulateTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.runs = stagecraft.simulate(stagecraft.Scenario.load(UNIFORM))
        cls.by_name = {r.schedule: r for r in cls.runs}

    def test_closed_forms(self):
        # p = 4, m = 8, F = I = W = 1 ms: GPipe and 1F1B (m + p - 1)(F + B) = 33 ms, bubble 3/11;
        # ZB-H1 cuts each rank's idle time to (p - 1)(F + I - W) = 3 ms: 27 ms (Zero Bubble, §3).
        gpipe, zb = self.by_name["gpipe"], self.by_name["zb-h1"]
        self.assertEqual(gpipe.step_time_ms, 33.0)
        self.assertAlmostEqual(gpipe.bubble_fraction, 3 / 11, places=9)
        self.assertEqual(self.by_name["1f1b"].step_time_ms, 33.0)
        self.assertEqual(zb.step_time_ms, 27.0)
        self.assertAlmostEqual(zb.throughput_samples_per_s, 8 / 27e-3, places=3)
        for run in self.runs:
            for rank in run.per_rank:
                parts = (rank.compute_ms + rank.wait_ms + rank.transfer_ms + rank.collective_ms + rank.overhead_ms
                         + rank.idle_ms)
                self.assertAlmostEqual(parts, run.makespan_ms, places=5, msg=f"{run.schedule} rank {rank.rank}")
        # GPipe holds every microbatch's activations at once on rank 0: 8 x 64 MiB + weights,
        # gradients (1 GiB each) is less than 1F1B's 4 in flight would be above.
        self.assertEqual(gpipe.per_rank[0].peak_inflight_microbatches, 8)
        self.assertEqual(self.by_name["1f1b"].per_rank[0].peak_inflight_microbatches, 4)
        self.assertGreater(gpipe.peak_memory_bytes, self.by_name["1f1b"].peak_memory_bytes)

    def test_attributes_are_the_codecs_keys(self):
        # Every key simulate --json writes is a documented, typed attribute (and the reverse for
        # the keys every predicted run has), so the stub cannot drift from the codec.
        for run in self.runs:
            data = run.to_dict()
            self.assertTrue(set(data) <= set(stagecraft.RunResult.__annotations__), set(data))
            for key, value in data.items():
                if key not in ("per_rank", "stages"):
                    self.assertEqual(getattr(run, key), value, key)
            for rank, rank_data in zip(run.per_rank, data["per_rank"]):
                self.assertTrue(set(rank_data) <= set(stagecraft.RankResult.__annotations__), set(rank_data))
                self.assertEqual(rank.to_dict(), rank_data)
            for stage, stage_data in zip(run.stages, data["stages"]):
                self.assertEqual(set(stage_data), set(stagecraft.StageCosts.__annotations__))
                self.assertEqual(stage.forward_ms, stage_data["forward_ms"])
        required = {"schedule", "ranks", "chunks", "microbatches", "microbatch_size", "steps", "makespan_ms",
                    "step_time_ms", "throughput_samples_per_s", "bubble_fraction", "oom", "per_rank", "stages"}
        self.assertEqual(required - set(self.runs[0].to_dict()), set())

    def test_bubble_split_and_trace(self):
        zb = self.by_name["zb-h1"]
        splits = zb.bubble_split()
        self.assertEqual(len(splits), 4)
        for split, rank in zip(splits, zb.per_rank):
            self.assertAlmostEqual(split.wait_ms, rank.wait_ms, places=6)
            self.assertAlmostEqual(split.idle_ms, rank.idle_ms, places=6)
            gap_ms = sum(g.end_ms - g.start_ms for g in split.gaps)
            self.assertAlmostEqual(gap_ms, zb.makespan_ms - split.compute_ms, places=6)
        # ZB-H1's idle per rank is (p - 1)(F + I - W) = 3 ms, whatever the rank (Zero Bubble, §3).
        for split in splits:
            self.assertAlmostEqual(zb.makespan_ms - split.compute_ms, 3.0, places=6)
        ir = zb.ir()
        self.assertTrue(ir.lowered)
        self.assertEqual(ir.validate(), [])
        trace = json.loads(zb.trace_json())
        self.assertEqual(trace["stagecraft"]["schedule"], "zb-h1")
        self.assertEqual(zb.memory_terms(0)["weights"], 1 << 30)

    def test_metrics_json_round_trip(self):
        text = stagecraft.metrics_json(self.runs)
        self.assertTrue(text.endswith("}\n"))
        data = json.loads(text)
        self.assertEqual([s["schedule"] for s in data["schedules"]], [r.schedule for r in self.runs])
        self.assertEqual(data["source"], "predicted")
        self.assertEqual(data["costs"], self.runs[0].cost_source)
        one = json.loads(stagecraft.metrics_json([self.by_name["gpipe"]]))
        self.assertEqual(one["schedules"], [self.by_name["gpipe"].to_dict()])

    def test_to_pandas(self):
        try:
            import pandas  # noqa: F401
        except ImportError:
            with self.assertRaisesRegex(ImportError, "needs pandas"):
                self.runs[0].to_pandas()
            with self.assertRaisesRegex(ImportError, "needs pandas"):
                stagecraft.to_pandas(self.runs)
            return
        frame = stagecraft.to_pandas(self.runs)
        self.assertEqual(list(frame["schedule"]), [r.schedule for r in self.runs])
        self.assertEqual(list(frame["step_time_ms"]), [r.step_time_ms for r in self.runs])
        ranks = self.by_name["gpipe"].to_pandas()
        self.assertEqual(list(ranks["peak_memory_bytes"]), [r.peak_memory_bytes for r in self.by_name["gpipe"].per_rank])

    def test_releases_the_gil(self):
        # A simulation in another thread lets this one run: a thread that held the GIL for the
        # whole call would leave `ticks` at its value until the call returned.
        scenario = stagecraft.Scenario.load(UNIFORM, {"pipeline.microbatches": 128, "pipeline.ranks": 16,
                                                      "topology.devices_per_node": 16})
        done = threading.Event()
        ticks = []

        def work():
            stagecraft.simulate(scenario)
            done.set()

        thread = threading.Thread(target=work)
        thread.start()
        while not done.is_set():
            ticks.append(1)
            done.wait(0.001)
        thread.join()
        self.assertGreater(len(ticks), 5)


class ScheduleTest(TempDirCase):
    def test_ir(self):
        s = stagecraft.schedule("1f1b", ranks=2, microbatches=2)
        self.assertEqual((s.name, s.ranks, s.chunks, s.stages, s.microbatches, s.weights), ("1f1b", 2, 1, 2, 2, "flush"))
        self.assertFalse(s.lowered)
        compute = [[op.action(2) for op in ops if op.kind in ("F", "B")] for ops in s.ops]
        # PyTorch's own 1F1B order for 2 ranks and 2 microbatches (tests/data/csv/1f1b_2x2.csv).
        self.assertEqual(compute, [["0F0", "0F1", "0B0", "0B1"], ["1F0", "1B0", "1F1", "1B1"]])
        self.assertEqual(s.to_csv(), (DATA / "csv" / "1f1b_2x2.csv").read_text())
        steps = [op for ops in s.ops for op in ops if op.kind == "STEP"]
        self.assertEqual([(op.stage, op.version) for op in steps], [(0, 1), (1, 1)])
        self.assertEqual(s.validate(), [])
        lowered = s.lower()
        self.assertTrue(lowered.lowered)
        self.assertEqual(lowered.validate(), [])
        kinds = {op.kind for ops in lowered.ops for op in ops}
        self.assertTrue({"SEND_F", "RECV_F", "SEND_B", "RECV_B"} <= kinds)
        self.assertEqual(json.loads(s.to_json())["schedule"], "1f1b")

    def test_from_csv(self):
        fixture = DATA / "csv" / "gpipe_3x3.csv"
        s = stagecraft.Schedule.from_csv(fixture)
        self.assertEqual((s.ranks, s.microbatches), (3, 3))
        from_text = stagecraft.Schedule.from_csv(fixture.read_text())
        self.assertEqual((from_text.name, s.name), ("<csv>", str(fixture)))
        self.assertEqual(from_text.ops, stagecraft.Schedule.from_csv(str(fixture)).ops)
        # The fixture's actions, without its idle slots (empty cells), which export leaves out.
        actions = [",".join(cell for cell in line.split(",") if cell) for line in fixture.read_text().splitlines()]
        self.assertEqual(s.to_csv().splitlines(), actions)
        with self.assertRaises(stagecraft.InputError) as caught:
            stagecraft.Schedule.from_csv(DATA / "csv" / "1f1b_2x2_missing_backward.csv")
        self.assertIn("missing", str(caught.exception))
        broken = stagecraft.Schedule.from_csv(DATA / "csv" / "1f1b_2x2_missing_backward.csv", validate=False)
        self.assertEqual([d.code for d in broken.validate()][:1], ["missing"])
        with self.assertRaises(stagecraft.InputError) as caught:
            stagecraft.Schedule.from_csv("0F0,0X1\n")
        self.assertEqual((caught.exception.file, caught.exception.line), ("<csv>", 1))

    def test_bad_arguments(self):
        with self.assertRaisesRegex(stagecraft.InputError, r"^schedule: ranks: expected an integer in \[1, "):
            stagecraft.schedule("gpipe", ranks=0, microbatches=4)
        with self.assertRaises(stagecraft.InputError):
            stagecraft.schedule("no-such-schedule", ranks=2, microbatches=4)
        self.assertIn("zb-v", stagecraft.generator_names())


class RunsTest(TempDirCase):
    def test_compare_hand_computed(self):
        # tests/data/compare: 1f1b predicted 110 ms against 100 measured (+10%), gpipe 95 against
        # 100 (-5%); zb-h1 only predicted, interleaved only measured.
        c = stagecraft.compare(DATA / "compare" / "predicted.json", DATA / "compare" / "measured.json", max_error=5)
        self.assertEqual(c.worst, "1f1b")
        self.assertAlmostEqual(c.worst_error_pct, 10.0, places=9)
        self.assertEqual(c.exceeded, ["1f1b"])
        d = c.to_dict()
        self.assertEqual(d["only_in_predicted"], ["zb-h1"])
        self.assertEqual(d["only_in_measured"], ["interleaved"])
        gpipe = next(s for s in c.schedules if s["schedule"] == "gpipe")
        self.assertAlmostEqual(gpipe["step_time_ms"]["error_pct"], -5.0, places=9)
        self.assertTrue(c.text.endswith("step-time error above 5.0%: 1f1b (+10.0%)\n"), c.text)

    def test_read_run_and_trace_of_a_simulation(self):
        scenario = stagecraft.Scenario.load(UNIFORM, {"pipeline.schedule": "zb-h1"})
        (run,) = stagecraft.simulate(scenario)
        (self.tmp / "p.json").write_text(stagecraft.metrics_json([run]))
        (self.tmp / "t.json").write_text(run.trace_json())
        back = stagecraft.read_run(self.tmp / "p.json")
        self.assertEqual((back.scenario, back.source), ("uniform-costs", "predicted"))
        self.assertEqual(back.find("zb-h1").to_dict(), run.to_dict())
        trace = stagecraft.read_trace(self.tmp / "t.json")
        self.assertEqual((trace.source, trace.schedule, trace.ranks, trace.skipped), ("predicted", "zb-h1", 4, 0))
        self.assertEqual(trace.summary.step_time_ms, run.step_time_ms)
        compute = [op for op in trace.ops if op.stream == 0]
        self.assertEqual(sum(op.duration_ms for op in compute), sum(r.busy_ms for r in run.per_rank))
        for split, rank in zip(trace.bubble_split(), run.per_rank):
            self.assertAlmostEqual(split.compute_ms, rank.compute_ms, places=6)
        # A run against itself: every error is 0.
        c = stagecraft.compare([run], back)
        self.assertEqual(c.worst_error_pct, 0.0)
        self.assertEqual(c.to_dict()["predicted_file"], "<simulate>")

    def test_bad_files(self):
        (self.tmp / "bad.json").write_text('{"schedules": [{"schedule": 3}]}')
        with self.assertRaises(stagecraft.InputError) as caught:
            stagecraft.read_run(self.tmp / "bad.json")
        self.assertEqual(caught.exception.file, str(self.tmp / "bad.json"))
        with self.assertRaises(stagecraft.InputError):
            stagecraft.read_trace(self.tmp / "bad.json")
        with self.assertRaises(stagecraft.InputError):
            stagecraft.compare(DATA / "compare" / "predicted.json", DATA / "compare" / "measured.json", max_error=-1)


class SearchTest(unittest.TestCase):
    def test_search_is_repeatable_and_valid(self):
        scenario = stagecraft.Scenario.load(UNIFORM, {"pipeline.microbatches": 6})
        a = stagecraft.search(scenario, memory_limit="2p", evaluations=40, seed=3)
        b = stagecraft.search(scenario, memory_limit="2p", evaluations=40, seed=3)
        self.assertEqual(a.to_csv(), b.to_csv())
        self.assertTrue(0 < a.evaluations <= 40, a.evaluations)
        self.assertLessEqual(a.best_step_ms, a.start_step_ms)
        # Uniform costs, 1 ms per pass: each rank computes 6 x 3 = 18 ms, which no step of a long
        # run goes under; the scenario runs one step, its step the first step alone, and there
        # rank 3 can start no sooner than 3 half forwards in (V or interleaved placement): the
        # bound is 1.5 + 18 ms (hand-worked).
        self.assertEqual(a.steps, 1)
        self.assertAlmostEqual(a.bound_ms, 19.5)
        self.assertEqual(a.best_step_ms, a.best_one_step_ms)
        self.assertGreaterEqual(a.best_step_ms, a.bound_ms)
        self.assertGreaterEqual(a.best_long_run_step_ms, 18.0)
        self.assertEqual(a.best.name, "searched")
        self.assertEqual(a.best.validate(), [])
        self.assertIn(f"start: {a.start_name} at", a.explanation)
        self.assertEqual(stagecraft.Schedule.from_csv(a.to_csv(), microbatches=6).to_csv(), a.to_csv())
        with self.assertRaisesRegex(stagecraft.InputError, "memory_limit"):
            stagecraft.search(scenario, memory_limit="lots", evaluations=1)


class StubTest(unittest.TestCase):
    def test_core_stub_is_the_module(self):
        # _core.pyi states every class, method, property and function of the compiled module,
        # and nothing it lacks.
        tree = ast.parse((Path(stagecraft.__file__).parent / "_core.pyi").read_text())
        stubbed = set()
        for node in tree.body:
            if isinstance(node, ast.ClassDef):
                stubbed.add(node.name)
                runtime = getattr(stagecraft._core, node.name)
                members = {n.name for n in node.body if isinstance(n, ast.FunctionDef)}
                self.assertEqual(members, {n for n in dir(runtime) if not n.startswith("_")}, node.name)
            elif isinstance(node, ast.FunctionDef):
                stubbed.add(node.name)
            elif isinstance(node, ast.AnnAssign):
                stubbed.add(node.target.id)
        self.assertEqual(stubbed, {n for n in dir(stagecraft._core) if not n.startswith("_")})


if __name__ == "__main__":
    unittest.main()
