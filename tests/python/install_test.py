"""`cmake --install`: the package lands in the prefix's site directory and imports from there,
compiled module included, away from the build tree."""

import os
import subprocess
import sys
import unittest

from support import SCENARIOS, TempDirCase

BINARY_DIR = os.environ.get("STAGECRAFT_BINARY_DIR")
SITE_DIR = os.environ.get("STAGECRAFT_PYTHON_INSTALL_DIR")


@unittest.skipUnless(BINARY_DIR and SITE_DIR, "run by ctest, which names the build and the install folder")
class InstallTest(TempDirCase):
    def test_install_and_import(self):
        prefix = self.tmp / "prefix"
        cmake = os.environ.get("STAGECRAFT_CMAKE", "cmake")
        done = subprocess.run([cmake, "--install", BINARY_DIR, "--prefix", str(prefix)], capture_output=True, text=True,
                              timeout=120)
        self.assertEqual(done.returncode, 0, done.stderr)
        site = prefix / SITE_DIR
        self.assertTrue((site / "stagecraft" / "__init__.py").is_file())
        self.assertTrue((site / "stagecraft" / "py.typed").is_file())
        code = ("import stagecraft, sys; print(stagecraft.__file__); "
                f"print(stagecraft.simulate(stagecraft.Scenario.load({str(SCENARIOS / 'uniform-costs.yaml')!r}, "
                "{'pipeline.schedule': 'gpipe'}))[0].step_time_ms)")
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        env["PYTHONPATH"] = str(site)
        run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env,
                             cwd=self.tmp)
        self.assertEqual(run.returncode, 0, run.stderr)
        where, step = run.stdout.split()
        self.assertEqual(os.path.dirname(where), str(site / "stagecraft"))
        self.assertEqual(float(step), 33.0)  # GPipe on uniform-costs: (m + p - 1)(F + B) = 11 x 3 ms


if __name__ == "__main__":
    unittest.main()
