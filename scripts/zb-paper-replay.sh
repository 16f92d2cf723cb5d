#!/usr/bin/env bash
# Replays the Zero Bubble paper's cost model (ICLR 2024, Table 5) with the simulator and checks
# every bubble rate against the paper's (tools/stagecraft_tools/zb_replay.py); exits 1 on a mismatch.
# Usage: scripts/zb-paper-replay.sh [--models 1.5B,...]
exec "$(dirname "${BASH_SOURCE[0]}")/tool.sh" zb_replay "$@"
