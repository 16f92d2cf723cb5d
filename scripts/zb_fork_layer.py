#!/usr/bin/env python3
"""scripts/zb-fork-layer.sh's entry point: stagecraft_tools.zb_fork_layer's main (tools/), run as a
script, so that the interpreter's path starts here and not in the working directory (the fork's
imports look for top-level packages such as `tools` there)."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tools"))
from stagecraft_tools.zb_fork_layer import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
