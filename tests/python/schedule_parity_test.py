"""Same schedules from Python as from `stagecraft schedule`: every generator's IR and CSV,
PyTorch CSV imports, in the forms the command prints them."""

import unittest

from support import DATA, TempDirCase, cli_error_line, run_cli

import stagecraft


class ScheduleParityTest(TempDirCase):
    def test_every_generator(self):
        # Each generator at one shape it takes (2 chunks for those that interleave; the refusal
        # of 2 by the others must be the binary's line) as CSV and as the lowered IR, and as CSV
        # at a second shape; the grid, the CSV with transfers and the lockstep lowering for three.
        # Each start of the binary costs a few tenths of a second on a machine with CUDA's
        # libraries, so the forms are not multiplied out.
        for name in stagecraft.generator_names():
            # spilled runs on one device; every other generator is a pipeline over 4 and 3 ranks.
            ranks, other_ranks = (1, 1) if name == "spilled" else (4, 3)
            try:
                chunks = 2
                s = stagecraft.schedule(name, ranks, 8, chunks)
            except stagecraft.InputError as e:
                args = ["schedule", "--schedule", name, "--ranks", ranks, "--microbatches", 8, "--chunks", 2]
                self.assertEqual(f"stagecraft: error: {e}", cli_error_line(*args))
                chunks = 1
                s = stagecraft.schedule(name, ranks, 8, chunks)
            args = ["schedule", "--schedule", name, "--ranks", ranks, "--microbatches", 8, "--chunks", chunks]
            with self.subTest(schedule=name, chunks=chunks):
                self.assertEqual(s.to_csv(), run_cli(*args, "--format", "csv")[1])
                self.assertEqual(s.to_json(), run_cli(*args, "--format", "json")[1])
                other = ["schedule", "--schedule", name, "--ranks", other_ranks, "--microbatches", 6, "--chunks", chunks]
                self.assertEqual(stagecraft.schedule(name, other_ranks, 6, chunks).to_csv(),
                                 run_cli(*other, "--format", "csv")[1])
                if name in ("1f1b", "zb-v", "dualpipe-v"):
                    self.assertEqual(s.grid(), run_cli(*args)[1])
                    self.assertEqual(s.to_csv(comms=True), run_cli(*args, "--format", "csv", "--comms")[1])
                    self.assertEqual(s.to_csv(comms=True, p2p="lockstep"),
                                     run_cli(*args, "--format", "csv", "--comms", "--p2p", "lockstep")[1])

    def test_import(self):
        comms = self.tmp / "comms.csv"
        comms.write_text(run_cli("schedule", "--schedule", "zb-h1", "--ranks", 3, "--microbatches", 4, "--format",
                                 "csv", "--comms")[1])
        for path in [DATA / "csv" / "1f1b_2x2.csv", DATA / "csv" / "gpipe_3x3.csv", comms]:
            with self.subTest(path=path.name):
                s = stagecraft.Schedule.from_csv(path)
                self.assertEqual(s.to_csv(), run_cli("schedule", "--import", path, "--format", "csv")[1])
                self.assertEqual(s.to_json(), run_cli("schedule", "--import", path, "--format", "json")[1])
                self.assertEqual(s.grid(), run_cli("schedule", "--import", path)[1])



if __name__ == "__main__":
    unittest.main()
