#!/usr/bin/env bash
# Checks `stagecraft plan` against real runs: the main CPU scenario profiled, planned for 2 devices,
# its top three executed; the order and each peak against the prediction (exits 1 when a measured
# peak is over its prediction by more than 2%; tools/stagecraft_tools/plan_check.py).
# Usage: scripts/plan-check.sh [--global-batch B] [--set KEY=VALUE]... [--out DIR] [PLAN FLAGS...]
exec "$(dirname "${BASH_SOURCE[0]}")/tool.sh" plan_check "$@"
