#!/usr/bin/env bash
# scripts/zb-fork-layer.sh and zb_fork_layer.py, the Zero Bubble paper's own stage timed with its
# own timers: bad input one line each. Where the release's tree has been prepared (build/zb-fork,
# or ZB_FORK_DIR) and a python3 here imports torch, also the script's CPU check (the fork's F / B /
# W through its weight-gradient store against plain autograd) and a rehearsal of the timing loop;
# otherwise that part is skipped, and said so (the tree is not in this repository).
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/cli_lib.bash"
wrap="$root/scripts/zb-fork-layer.sh"
py_script="$root/scripts/zb_fork_layer.py"
py=""
for candidate in python3 /usr/bin/python3; do
  "$candidate" -c 'import torch' 2>/dev/null && { py="$candidate"; break; }
done

expect_command_error "no prepared tree" "run scripts/zb-fork-layer.sh --prepare ZB_GIT APEX_GIT first" 2 \
  env ZB_FORK_DIR="$tmp/none" "$wrap" --check
git init -q "$tmp/notzb" && git -C "$tmp/notzb" -c user.name=t -c user.email=t@t commit -q --allow-empty -m x
expect_command_error "prepare: a repository without the release" "no commit ed85b11c (the Zero Bubble code release)" 2 \
  env ZB_FORK_DIR="$tmp/zb" "$wrap" --prepare "$tmp/notzb" "$tmp/notzb"
check "prepare: nothing left behind" '[[ ! -e "$tmp/zb" ]] && [[ -z "$(ls -d "$tmp"/zb.* 2>/dev/null)" ]]'

if [[ -z "$py" ]]; then
  echo "skipped: zb_fork_layer.py's argument checks, CPU check and rehearsal (no python3 here imports torch)"
  exit $fail
fi
# Where setuptools no longer gives pkg_resources.packaging (70 and later) or is missing, the
# stand-in gives the name the fork imports at load time.
check "pkg_resources without packaging: the name given once, then left alone" "cd '$root/scripts' && '$py' -c \"
import sys
sys.modules['pkg_resources'] = None  # import pkg_resources now fails, as without setuptools
import zb_fork_layer as z
first = z.pkg_resources_packaging()
from pkg_resources import packaging
sys.exit(0 if first and not z.pkg_resources_packaging() and packaging is not None else 1)\""
mkdir -p "$tmp/empty"
expect_command_error "a --fork without the release's megatron/" "no megatron/core/weight_grad_store.py" 2 \
  "$py" "$py_script" --fork "$tmp/empty" --check
fork="${ZB_FORK_DIR:-$root/build/zb-fork}"
if [[ ! -f "$fork/fork/megatron/core/weight_grad_store.py" ]]; then
  echo "skipped: zb_fork_layer.py's CPU check and rehearsal (no release tree in $fork: scripts/zb-fork-layer.sh --prepare)"
  exit $fail
fi
expect_command_error "an unknown model" "unknown model '2B'" 2 "$py" "$py_script" --fork "$fork/fork" --models 2B --check
expect_command_error "the GPU run without Apex" "--apex DIR" 2 "$py" "$py_script" --fork "$fork/fork" --jit fused

# The fork's layers look for Apex's weight-gradient module once, at import: importing the fork
# before it is in place (as a GPU run would, built after) is refused, not run without it.
(cd "$root/scripts" && "$py" -c "import sys, zb_fork_layer as z; z.load_fork(sys.argv[1], cpu=False)" \
  "$fork/fork") >"$tmp/order" 2>&1
check "the fork imported before the weight-gradient module: refused" \
  '[[ $? -ne 0 ]] && grep -q "must be in place before the fork is imported" "$tmp/order"'
"$py" "$py_script" --fork "$fork/fork" --check >"$tmp/check" 2>"$tmp/err"
checkf "check: exit 0" '[[ $? -eq 0 ]]' "$tmp/err"
check "check: the store's W gives autograd's gradients" \
  'grep -qE "^ok: the fork.s stage \(3 layers, hidden 64\) .* 12 weight gradients from W \(want 12\)" "$tmp/check"'

# The fork's operators per pass as the dispatcher sees them (its code read, docs/cost-model.md):
# F's attention reads q, k and v as views of the QKV output (no copy; only merge_heads' permute is
# made contiguous: one clone); B rebuilds the QKV output's gradient with one cat and copies
# nothing else; W runs the four weight GEMMs the store took in B (on the CPU through the
# stand-in for Apex's kernel, so the count is the store's).
"$py" "$py_script" --fork "$fork/fork" --ops 1.5B >"$tmp/ops" 2>"$tmp/err"
checkf "ops: exit 0" '[[ $? -eq 0 ]]' "$tmp/err"
check "ops: three passes" '[[ $(grep -cE "^[FBW]: the aten operators dispatched" "$tmp/ops") -eq 3 ]]'
copies() { sed -n "/^$1:/,/^$2:/p" "$tmp/ops" | grep -cE "aten::(clone|copy_|cat|contiguous) "; }
check "ops: F copies once (merge_heads' clone), B once (the QKV split's cat), W has four GEMMs" \
  '[[ $(copies F B) -eq 1 && $(sed -n "/^F:/,/^B:/p" "$tmp/ops" | grep -c "aten::clone ") -eq 1 &&
     $(copies B W) -eq 1 && $(sed -n "/^B:/,/^W:/p" "$tmp/ops" | grep -c "aten::cat ") -eq 1 &&
     $(sed -n "/^W:/,\$p" "$tmp/ops" | grep -c "aten::mm ") -eq 4 ]]'

ZB_FORK_DIR="$fork" "$wrap" --rehearse --iters 2 --warmup 1 --out "$tmp/r.json" >"$tmp/rehearse" 2>"$tmp/err"
checkf "rehearsal: exit 0" '[[ $? -eq 0 ]]' "$tmp/err"
check "rehearsal: four models, fuser on and off" \
  '[[ $(grep -cE "^ +[0-9.]+B +(fused|unfused) +F [0-9.]+ +B [0-9.]+ +W [0-9.]+ ms per layer" "$tmp/rehearse") -eq 8 ]]'
# The paper's ratios beside each model are its profile's (Appendix D), recomputed here from the CSV.
check "rehearsal: the JSON, each model's stage and the paper's ratios" "python3 - '$tmp/r.json' '$root/tests/data/zero_bubble_paper.csv' <<'PY'
import csv, json, statistics, sys
r = json.load(open(sys.argv[1]))
rows = [x for x in csv.DictReader(l for l in open(sys.argv[2]) if l.strip() and not l.startswith('#'))]
middle = {'1.5B': 3, '6.2B': 4, '14.6B': 3, '28.3B': 2}  # (layers + 2) // p: 22/8, 30/8, 46/16, 62/32
ok = len(r['models']) == 8
for key, e in r['models'].items():
    model, jit = key.split('/')
    mine = [x for x in rows if x['model'] == model]
    f, b, w = (statistics.median(float(x[k]) for x in mine) for k in ('f_us', 'b_us', 'w_us'))
    ok &= e['layers'] == middle[model] and e['jit'] == jit and e['iters'] == 2
    ok &= abs(e['paper_b_over_f'] - b / f) < 1e-9 and abs(e['paper_w_over_f'] - w / f) < 1e-9
    ok &= all(e['mean_ms'][k] > 0 for k in 'FBW') and abs(e['b_over_f'] - e['mean_ms']['B'] / e['mean_ms']['F']) < 1e-12
sys.exit(0 if ok else 1)
PY"
exit $fail
