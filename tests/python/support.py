"""What the Python tests share: where the sources and the `stagecraft` binary are (ctest passes
them in the environment), running the binary, and a temporary folder per test case."""

import os
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

SOURCE_DIR = Path(os.environ.get("STAGECRAFT_SOURCE_DIR", Path(__file__).resolve().parents[2]))
CLI = os.environ.get("STAGECRAFT_CLI", str(SOURCE_DIR / "build" / "cli" / "stagecraft"))
SCENARIOS = SOURCE_DIR / "scenarios"
DATA = SOURCE_DIR / "tests" / "data"

if "PYTHONPATH" not in os.environ:  # run by hand from the source tree
    sys.path.insert(0, str(SOURCE_DIR / "build" / "python"))


def run_cli(*args, check=True):
    """Runs `stagecraft ARGS`; returns (exit code, stdout, stderr)."""
    done = subprocess.run([CLI, *map(str, args)], capture_output=True, text=True, timeout=120)
    if check and done.returncode != 0:
        raise AssertionError(f"stagecraft {' '.join(map(str, args))} failed ({done.returncode}): {done.stderr}")
    return done.returncode, done.stdout, done.stderr


def cli_error_line(*args):
    """The one error line `stagecraft ARGS` prints, checking that it fails with exit code 1."""
    code, _, err = run_cli(*args, check=False)
    lines = err.splitlines()
    if code != 1 or not lines:
        raise AssertionError(f"stagecraft {' '.join(map(str, args))}: expected exit 1 and an error, got {code}: {err}")
    return lines[-1]


class TempDirCase(unittest.TestCase):
    """A test case with a fresh temporary folder, `self.tmp`."""

    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory(prefix="stagecraft-py-")
        self.tmp = Path(self._tmp.name)

    def tearDown(self):
        self._tmp.cleanup()
