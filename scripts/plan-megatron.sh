#!/usr/bin/env bash
# Checks `stagecraft plan` against Megatron-LM's SC'21 Table 1 layouts: per row the plan's best and
# the paper's layout in TFLOP/s per GPU; exits 1 when a plan is slower than the paper's layout
# (tools/stagecraft_tools/plan_megatron.py).
# Usage: scripts/plan-megatron.sh [--rows 1,2,...] [PLAN FLAGS...]
exec "$(dirname "${BASH_SOURCE[0]}")/tool.sh" plan_megatron "$@"
