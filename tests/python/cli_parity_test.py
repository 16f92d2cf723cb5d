"""Same answers from Python as from the `stagecraft` binary: simulate on the shipped scenarios
(the metrics file byte for byte, the table's numbers to its precision), search and compare; and
bad input raises InputError with the line the binary prints (schedule: schedule_parity_test.py). The module calls the C++ libraries itself, so the binary is an independent
path through the commands' own code."""

import json
import math
import re
import unittest

from support import DATA, SCENARIOS, TempDirCase, cli_error_line, run_cli

import stagecraft

# The shipped scenarios simulate checks (each well under a second here), and the ones it leaves
# out with why: a new scenario must be put in one of the two.
QUICK = ["gpt-1.3b-2x4xh100", "gpt-1.3b-8xh100", "gpt-1.3b-h100-a100", "gpt-gpu", "gpt-text-cpu", "gpt-tiny-cpu",
         "hydra-spilled-k80", "llama3-8b-8xh100", "mixtral-8x7b-64xh100", "deepseek-v3-2048xh800",
         "gpt-oss-120b-64xh100", "llama31-405b-1024xh100", "mlp-cpu", "mlp-digits-cpu", "mlp-gpu", "pipedream-hybrid-2x4xv100", "uniform-costs", "zero-bubble-paper"]
# Multi-model workloads (tasks:): simulate_workload() against simulate --json.
WORKLOADS = ["hydra-sweep-4xk80"]
SLOW = {
    "gpt-1t-3072xa100": "three schedules of 512 microbatches on 64 ranks take about a second each way",
    "gpt3-175b-384xh100": "its replicas' collectives make it seconds per run each way",
}

# simulate's table row: schedule, step time, throughput, bubble, peak memory (worst rank), OOM.
ROW = re.compile(r"^(\S+)\s+([\d.]+) ms\s+([\d.]+) samples/s\s+([\d.]+)%\s+.+\(rank\s+(\d+)\)\s+(no|OOM)$")


class SimulateParityTest(TempDirCase):
    def test_every_shipped_scenario_is_classified(self):
        shipped = {p.stem for p in SCENARIOS.glob("*.yaml")}
        self.assertEqual(shipped, set(QUICK) | set(SLOW) | set(WORKLOADS))

    def test_workloads(self):
        for name in WORKLOADS:
            with self.subTest(scenario=name):
                path = SCENARIOS / f"{name}.yaml"
                out = self.tmp / f"{name}.json"
                _, table, _ = run_cli("simulate", path, "--json", out)
                scenario = stagecraft.Scenario.load(path)
                data = stagecraft.simulate_workload(scenario)
                self.assertEqual(data, json.loads(out.read_text()))
                workload = data["workload"]
                # The table's two makespans, to its precision, and the same tasks.
                for scheduler in ("lrtf", "sequential"):
                    line = next(l for l in table.splitlines() if l.startswith(scheduler + " "))
                    self.assertIn(f"makespan {workload[scheduler + '_makespan_ms'] / 1000:10.3f} s", line)
                self.assertEqual([t["name"] for t in workload["tasks"]],
                                 [s["schedule"].split("/")[0] for s in data["schedules"]])
                # simulate() runs one model: a workload is refused with the line that says what runs it.
                with self.assertRaisesRegex(stagecraft.InputError, "simulate_workload\\(\\) runs the workload"):
                    stagecraft.simulate(scenario)

    def test_simulate(self):
        for name in QUICK:
            with self.subTest(scenario=name):
                path = SCENARIOS / f"{name}.yaml"
                out = self.tmp / f"{name}.json"
                _, table, _ = run_cli("simulate", path, "--json", out)
                runs = stagecraft.simulate(stagecraft.Scenario.load(path))
                self.assertEqual(stagecraft.metrics_json(runs), out.read_text())
                rows = {m[1]: m for m in map(ROW.match, table.splitlines()) if m}
                self.assertEqual(sorted(rows), sorted(r.schedule for r in runs))
                for run in runs:
                    row = rows[run.schedule]
                    self.assertEqual(f"{run.step_time_ms:.3f}", row[2])
                    # At least three significant digits, one decimal from 10 up (schedules::ThroughputText).
                    x = run.throughput_samples_per_s
                    decimals = min(max(2 - math.floor(math.log10(x)), 1), 12)
                    self.assertEqual(f"{x:.{decimals}f}", row[3])
                    self.assertEqual(f"{100 * run.bubble_fraction:.2f}", row[4])
                    self.assertEqual(run.worst_memory_rank, int(row[5]))
                    self.assertEqual(run.oom, row[6] == "OOM")

    def test_simulate_with_overrides_and_trace(self):
        path = SCENARIOS / "zero-bubble-paper.yaml"
        sets = {"pipeline.microbatches": 24, "pipeline.schedule": ["1f1b", "zb-h2"]}
        out, trace = self.tmp / "p.json", self.tmp / "t.json"
        run_cli("simulate", path, "--set", "pipeline.microbatches=24", "--set", "pipeline.schedule=[1f1b, zb-h2]",
                "--json", out, "--trace", trace)
        runs = stagecraft.simulate(stagecraft.Scenario.load(path, sets))
        self.assertEqual(stagecraft.metrics_json(runs), out.read_text())
        for run in runs:
            self.assertEqual(run.trace_json(), (self.tmp / f"t.{run.schedule}.json").read_text())


class SearchCompareParityTest(TempDirCase):
    def test_search(self):
        path = SCENARIOS / "uniform-costs.yaml"
        out = self.tmp / "s.csv"
        _, text, _ = run_cli("search", path, "--set", "pipeline.microbatches=6", "--memory-limit", "2p",
                             "--evaluations", 60, "--seed", 7, "--out", out)
        r = stagecraft.search(stagecraft.Scenario.load(path, {"pipeline.microbatches": 6}), memory_limit="2p",
                              evaluations=60, seed=7)
        self.assertEqual(r.to_csv(), out.read_text())
        # The explanation, but for the search's own wall-clock time.
        def timeless(t):
            return re.sub(r", [\d.]+ s\)", ")", t)
        self.assertEqual(timeless(r.explanation), timeless(text[:len(text) - len(text.splitlines()[-1]) - 1]))

    def test_compare(self):
        pred, meas = DATA / "compare" / "predicted.json", DATA / "compare" / "measured.json"
        out = self.tmp / "c.json"
        code, text, _ = run_cli("compare", pred, meas, "--max-error", 5, "--json", out, check=False)
        self.assertEqual(code, 3)
        c = stagecraft.compare(pred, meas, max_error=5)
        self.assertEqual(c.text, text)
        self.assertEqual(c.json, out.read_text())
        # A partial run: the warning line the binary prints on stderr.
        partial = self.tmp / "m.json.partial"
        partial.write_text(meas.read_text().rstrip()[:-1] + ',"partial":{"schedules_done":3,"schedules_total":4,'
                           '"schedule":"zb-h1","steps":4,"steps_done":1,"losses":[2.0],"step_ms":[90.0]}}\n')
        code, text, err = run_cli("compare", pred, partial, check=False)
        self.assertEqual(code, 0, err)
        c = stagecraft.compare(pred, partial)
        self.assertEqual(c.text, text)
        self.assertEqual(c.warnings, err.splitlines())


class ErrorParityTest(TempDirCase):
    def assert_same_line(self, cli_args, call, flag=None, argument=None):
        """The binary's line, with `flag` at its start put as `argument` where given."""
        line = cli_error_line(*cli_args)
        if flag is not None:
            line = line.replace(f"stagecraft: error: {flag}", f"stagecraft: error: {argument}", 1)
        with self.assertRaises(stagecraft.InputError) as caught:
            call()
        self.assertEqual(f"stagecraft: error: {caught.exception}", line)
        return caught.exception

    def test_scenarios(self):
        uniform = SCENARIOS / "uniform-costs.yaml"
        text = uniform.read_text()
        cases = {
            "typo.yaml": text.replace("microbatches: 8", "microbatchs: 8"),
            "type.yaml": text.replace("ranks: 4", "ranks: four"),
            "unit.yaml": text.replace("forward: 1ms", "forward: 1 parsec"),
            "yaml.yaml": text.replace("name: uniform-costs", 'name: "uniform-costs'),
            "escape.yaml": text.replace("name: uniform-costs", 'name: "a\\tb"').replace("ranks: 4", "ranks: 0"),
        }
        for file, body in cases.items():
            with self.subTest(file=file):
                path = self.tmp / file
                path.write_text(body)
                e = self.assert_same_line(["simulate", path], lambda: stagecraft.simulate(stagecraft.Scenario.load(path)))
                self.assertEqual(e.file, str(path))
        e = self.assert_same_line(["simulate", self.tmp / "absent.yaml"],
                                  lambda: stagecraft.Scenario.load(self.tmp / "absent.yaml"))
        self.assertIsNone(e.line)
        self.assert_same_line(["simulate", uniform, "--set", "pipeline.microbatches=-3"],
                              lambda: stagecraft.Scenario.load(uniform, {"pipeline.microbatches": -3}),
                              "--set ", "Scenario.load: overrides: ")
        self.assert_same_line(["simulate", uniform, "--set", "pipeline.schedule=nope"],
                              lambda: stagecraft.simulate(stagecraft.Scenario.load(uniform, {"pipeline.schedule": "nope"})),
                              "--set ", "Scenario.load: overrides: ")
        # A dict is read as the same text written to a file would be.
        data = {"name": "d", "pipeline": {"schedule": "gpipe", "ranks": 2, "microbatches": "many"}}
        path = self.tmp / "dict.yaml"
        path.write_text(json.dumps(data, indent=2) + "\n")
        self.assert_same_line(["simulate", path], lambda: stagecraft.Scenario.from_dict(data, path=str(path)))

    def test_schedules_and_files(self):
        self.assert_same_line(["schedule", "--schedule", "dualpipe-v", "--ranks", 4, "--microbatches", 6],
                              lambda: stagecraft.schedule("dualpipe-v", 4, 6))
        self.assert_same_line(["schedule", "--schedule", "zb-x", "--ranks", 4, "--microbatches", 8],
                              lambda: stagecraft.schedule("zb-x", 4, 8))
        missing = DATA / "csv" / "1f1b_2x2_missing_backward.csv"
        self.assert_same_line(["schedule", "--import", missing], lambda: stagecraft.Schedule.from_csv(missing))
        bad = self.tmp / "bad.csv"
        bad.write_text("0F0,0B0\n1F0,1Q0\n")
        e = self.assert_same_line(["schedule", "--import", bad], lambda: stagecraft.Schedule.from_csv(bad))
        self.assertEqual((e.file, e.line), (str(bad), 2))
        broken = self.tmp / "broken.json"
        broken.write_text('{"schedules": [}')
        pred = DATA / "compare" / "predicted.json"
        self.assert_same_line(["compare", broken, pred], lambda: stagecraft.compare(broken, pred))
        self.assert_same_line(["compare", pred, DATA / "csv"], lambda: stagecraft.compare(pred, DATA / "csv"))


if __name__ == "__main__":
    unittest.main()
