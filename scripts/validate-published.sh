#!/usr/bin/env bash
# Predicts the published GPU measurements of data/ (Megatron-LM SC'21 Table 1, Korthikanti et al.
# Tables 4 and 5, the Zero Bubble paper's Table 4, MT-NLG 530B) with the roofline cost model, per
# row predicted / published / error, against median <= 5% and largest <= 10%
# (tools/stagecraft_tools/published.py). Exits 1 when table 1 misses them (any table, --strict).
# Usage: scripts/validate-published.sh [--strict] [--zb-split] [--set KEY=VALUE]...
exec "$(dirname "${BASH_SOURCE[0]}")/tool.sh" published "$@"
