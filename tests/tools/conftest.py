"""What the tools' tests share: the package on the path, the build (ctest passes STAGECRAFT_BUILD;
by hand, build/), and running a script of scripts/ as a user does."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
os.environ.setdefault("STAGECRAFT_BUILD", str(ROOT / "build"))
os.environ.setdefault("STAGECRAFT_PYTHON", sys.executable)
os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")


def run_script(name, *args, env=None, timeout=300):
    """Runs scripts/`name` with `args`; returns the CompletedProcess (text)."""
    return subprocess.run([str(ROOT / "scripts" / name), *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, env=dict(os.environ, **(env or {})))


def one_error_line(done, tool):
    """The single stderr line of a failed run, checked to name `tool` and carry no traceback."""
    assert done.returncode != 0, done.stdout
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"{tool}: "), done.stderr
    return lines[0]


@pytest.fixture
def script():
    return run_script
