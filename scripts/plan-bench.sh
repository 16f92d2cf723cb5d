#!/usr/bin/env bash
# Times `stagecraft plan` on the 1T-parameter GPT on 3,072 A100s (scenarios/gpt-1t-3072xa100.yaml,
# --gpus 3072 --global-batch 3072, the whole space: every schedule, recompute none, selective and
# full, ZeRO 0 and 1, both partitions, auto for the leading pure pipelines) on every core of this
# machine, and prints its counts: configurations enumerated, rejected by kind, simulated. Target:
# under 60 s on the 2-core development machine; exits 1 above it.
# Usage: scripts/plan-bench.sh [PLAN FLAGS...]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
sc="${STAGECRAFT:-$root/build/cli/stagecraft}"   # STAGECRAFT=BINARY runs another build
[[ -x "$sc" ]] || "$root/scripts/build.sh" >/dev/null
tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
start=$(date +%s.%N)
"$sc" plan "$root/scenarios/gpt-1t-3072xa100.yaml" --gpus 3072 --global-batch 3072 --json "$tmp/plan.json" "$@" \
  >"$tmp/out" 2>"$tmp/err"
end=$(date +%s.%N)
sed -n '1,/^top /p' "$tmp/out" | sed '$d'
sed -n '/^top /,/^why/p' "$tmp/out" | sed -n '1,5p'
tail -1 "$tmp/err"
python3 - "$start" "$end" "$(nproc)" <<'PY'
import sys
start, end, cores = float(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
seconds = end - start
print(f"1T plan on {cores} cores: {seconds:.1f} s wall (target < 60 s): {'ok' if seconds < 60 else 'TOO SLOW'}")
sys.exit(0 if seconds < 60 else 1)
PY
