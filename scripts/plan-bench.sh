#!/usr/bin/env bash
# Times `stagecraft plan` on the 1T GPT on 3,072 A100s, the whole space, on every core; target under
# 60 s, exits 1 above it (tools/stagecraft_tools/plan_bench.py).
# Usage: scripts/plan-bench.sh [--scenario FILE --gpus N --global-batch B] [PLAN FLAGS...]
exec "$(dirname "${BASH_SOURCE[0]}")/tool.sh" plan_bench "$@"
