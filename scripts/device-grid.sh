#!/usr/bin/env bash
# A grid over the A100's fitted constants: at each point Megatron-LM's Table 1 errors and the Zero
# Bubble profile's B/F and W/F (tools/stagecraft_tools/device_grid.py). A benchmark: exits 0.
# Usage: scripts/device-grid.sh [JOBS] [KEY=V1,V2,...]...   (a KEY is under topology.device)
exec "$(dirname "${BASH_SOURCE[0]}")/tool.sh" device_grid "$@"
