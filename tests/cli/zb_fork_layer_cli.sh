#!/usr/bin/env bash
# scripts/zb-fork-layer.sh and its program (scripts/zb_fork_layer.py, the entry point of
# tools/stagecraft_tools/zb_fork_layer.py), the Zero Bubble paper's own stage timed with its own timers: bad input one line each. Where the release's tree has been prepared (build/zb-fork,
# or ZB_FORK_DIR) and a python3 here imports torch, also the script's CPU check (the fork's F / B /
# W through its weight-gradient store against plain autograd) and a rehearsal of the timing loop;
# otherwise that part is skipped, and said so (the tree is not in this repository). --compare (a
# run's JSON beside the list's prediction) needs neither, and is checked everywhere.
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

# The stand-ins the fork's imports get (no torch needed): a package that is installed keeps the
# misses it expects while it loads (regex's `from regex import X`, tried as the submodule
# regex.X), and gets a stand-in only for a submodule it lacks; a package not installed is one.
mkdir -p "$tmp/site/regex" "$tmp/site/einops"
printf '%s\n' "try:" "    from regex import NOT_YET" "    RESULT = 'a stand-in'" "except ImportError:" \
  "    RESULT = 'missed'" >"$tmp/site/regex/__init__.py"
echo "VALUE = 1" >"$tmp/site/einops/__init__.py"
check "stand-ins: only where nothing real is" "PYTHONPATH='$tmp/site:$root/tools' python3 - <<'PY'
import sys
from stagecraft_tools import zb_fork_load
finder = zb_fork_load._StubFinder()
sys.meta_path.append(finder)
import regex, einops.layers.torch, tiktoken.load
real = lambda m: not isinstance(sys.modules[m], zb_fork_load._StubModule)
sys.exit(0 if regex.RESULT == 'missed' and real('regex') and real('einops') and einops.VALUE == 1 and
         finder.stubbed == ['einops.layers', 'einops.layers.torch', 'tiktoken', 'tiktoken.load'] else 1)
PY"

# --compare: a made-up run of two models beside the list on the A100's file. The oracle is
# `simulate --explain`'s text for the same layer: the runtime's W is the four weight GEMMs (the
# .dW rows), its B the list's I plus the rest of the list's W, its F the list's F.
cat >"$tmp/run.json" <<'JSON'
{"device": "NVIDIA Q", "models": {
 "1.5B/fused": {"layers": 3, "heads": 24, "hidden": 2304, "microbatch": 6, "seq": 1024,
   "mean_ms": {"F": 3.0, "B": 3.6, "W": 1.2}, "paper_b_over_f": 0.9765, "paper_w_over_f": 0.5038},
 "28.3B/unfused": {"layers": 2, "heads": 48, "hidden": 6144, "microbatch": 1, "seq": 1024,
   "mean_ms": {"F": 2.5, "B": 2.6, "W": 1.4}, "paper_b_over_f": 0.981, "paper_w_over_f": 0.740}}}
JSON
"$wrap" --compare "$tmp/run.json" --device-file A100-SXM-80GB >"$tmp/cmp" 2>"$tmp/err"
checkf "compare: exit 0" '[[ $? -eq 0 ]]' "$tmp/err"
for spec in "1.5B fused 2304 24 6" "28.3B unfused 6144 48 1"; do
  set -- $spec
  printf '%s\n' "name: one" "topology: {device: A100-SXM-80GB, nodes: 1, devices_per_node: 1, links: []}" \
    "model: {transformer: {layers: 1, hidden: $3, heads: $4, seq: 1024, vocab: 50304, dropout: true}}" \
    "pipeline: {schedule: 1f1b, ranks: 1, microbatches: 1, microbatch_size: $5, steps: 1}" \
    "training: {optimizer: adam, lr: 0.0001, dtype: fp16}" >"$tmp/one.yaml"
  "$sc" simulate "$tmp/one.yaml" --explain >"$tmp/explain" 2>&1
  check "compare: $1 $2 against --explain's text" "python3 - '$tmp/explain' '$tmp/cmp' '$1' '$2' <<'PY'
import re, sys
text = open(sys.argv[1]).read().split('-- one transformer block')[1].split('-- ')[0]
f, i, w = (float(x) for x in re.search(r'one transformer block: F ([0-9.]+) ms, I ([0-9.]+) ms, W ([0-9.]+) ms', text).groups())
gemms = sum(float(m) for m in re.findall(r'^W +[a-z0-9_]+[.]dW +([0-9.]+)', text, re.M)) / 1e3
want = {'F': f, 'B': i + w - gemms, 'W': gemms}
row = re.search(r'^ *' + re.escape(sys.argv[3]) + r' +' + sys.argv[4] + r' +(.*)$', open(sys.argv[2]).read(), re.M)
got = [float(x) for x in re.findall(r'/ ([0-9.]+)', row.group(1))][:3] if row else []
ok = len(got) == 3 and len(re.findall(r'^W ', text, re.M)) == 10
ok = ok and all(abs(g - want[k]) <= 0.002 + 1e-3 * want[k] for g, k in zip(got, 'FBW'))
sys.exit(0 if ok else 1)
PY"
done
check "compare: the JSON beside the run's" "python3 -c \"
import json, sys
c = json.load(open('$tmp/run.compare.json'))
sys.exit(0 if c['device'] == 'A100-SXM-80GB' and set(c['models']) == {'1.5B/fused', '28.3B/unfused'} else 1)\""
# The H100 run of 2026-11-27 (tests/data; docs/gpu-runs/2026-11-27-h100.md): the device file
# found from the GPU's name, every model and TorchScript setting a row, and the measured ratios
# those of the run's own means.
cp "$root/tests/data/h100_zb_fork_layer_2026-11-27.json" "$tmp/h100.json"
"$wrap" --compare "$tmp/h100.json" >"$tmp/h100cmp" 2>"$tmp/err"
checkf "compare: the H100 run, exit 0" '[[ $? -eq 0 ]] && grep -q "against the list on H100-SXM" "$tmp/h100cmp"' "$tmp/err"
check "compare: the H100 run, its eight rows measured as the run says" "python3 - '$tmp/h100.json' '$tmp/h100cmp' <<'PY'
import json, re, sys
run = json.load(open(sys.argv[1]))['models']
text = open(sys.argv[2]).read()
ok = len(run) == 8
for key, m in run.items():
    model, jit = key.split('/')
    row = re.search(r'^ *' + re.escape(model) + r' +' + jit + r' +(.*)$', text, re.M)
    meas = [float(x) for x in re.findall(r'([0-9.]+) /', row.group(1))] if row else []
    t = m['mean_ms']
    want = [t['F'], t['B'], t['W'], t['B'] / t['F'], t['W'] / t['F']]
    ok = ok and len(meas) >= 5 and all(abs(a - b) <= 6e-4 for a, b in zip(meas[:3] + meas[3:6:2], want))
sys.exit(0 if ok else 1)
PY"
# What the run says of the model (docs/cost-model.md, "It does not keep B = F"): with the
# release's fused kernels, the list on the H100's file gives each model's B/F and W/F within 10%
# of the run's means (the accuracy issue 30 asks of a profile, held here against a measured one;
# with the run's medians the largest gap is 9.7%).
check "compare: the H100 run, the list's B/F and W/F within 10% of the fused run's" "python3 - '$tmp/h100.compare.json' <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))['models']
fused = [m for k, m in c.items() if k.endswith('/fused')]
ratio = lambda t, a: t[a] / t['F']
errs = [abs(ratio(m['predicted_ms'], a) / ratio(m['measured_ms'], a) - 1) for m in fused for a in 'BW']
print(' '.join(f'{e:.3f}' for e in errs))
sys.exit(0 if len(errs) == 8 and max(errs) <= 0.10 else 1)
PY"
expect_command_error "compare: a GPU with no device file" "no device file for 'NVIDIA Q': name one with --device-file" 1 \
  "$wrap" --compare "$tmp/run.json"
expect_command_error "compare: no such file" "$tmp/none.json: not a run's JSON" 1 "$wrap" --compare "$tmp/none.json"
expect_command_error "compare: a stray argument" "usage: scripts/zb-fork-layer.sh --compare FILE [--device-file NAME]" 2 \
  "$wrap" --compare "$tmp/run.json" --fused
expect_command_error "compare: no file" "usage: scripts/zb-fork-layer.sh --compare FILE [--device-file NAME]" 2 \
  "$wrap" --compare
expect_command_error "compare: an empty device file" "usage: scripts/zb-fork-layer.sh --compare FILE [--device-file NAME]" 2 \
  "$wrap" --compare "$tmp/run.json" --device-file ""
expect_command_error "compare: a layer probe's JSON" "not a run's JSON (\"models\" is a list" 1 \
  "$wrap" --compare "$root/tests/data/h100_layer_probe_fp16_2026-11-26.json"
printf '%s\n' '{"device": "NVIDIA Q", "models": {"1.5B/fused": {"hidden": 2304}}}' >"$tmp/short.json"
expect_command_error "compare: a model without its fields" "not a run's JSON (models['1.5B/fused'] is not MODEL/JIT with" 1 \
  "$wrap" --compare "$tmp/short.json" --device-file H100-SXM

# After a timed run that wrote its JSON the comparison follows, and its failure leaves the run's
# exit status alone. A stand-in python3 plays the GPU machine's: it imports torch and "times"
# the stage by writing RUN_JSON to --out (every other call goes to the real interpreter).
mkdir -p "$tmp/bin" "$tmp/fakefork/fork/megatron"
cat >"$tmp/bin/python3" <<'STUB'
#!/usr/bin/env bash
[[ "${1:-}" == "-c" ]] && exit 0
if [[ "${1:-}" == */zb_fork_layer.py ]]; then
  out=""
  for a in "$@"; do [[ "$a" == --out=* ]] && out="${a#--out=}"; [[ "${prev:-}" == "--out" ]] && out="$a"; prev="$a"; done
  cp "$RUN_JSON" "$out"
  exit 0
fi
exec /usr/bin/python3 "$@"
STUB
chmod +x "$tmp/bin/python3"
sed 's/"NVIDIA Q"/"NVIDIA H100 80GB HBM3"/' "$tmp/run.json" >"$tmp/h100.json"
env PATH="$tmp/bin:$PATH" RUN_JSON="$tmp/h100.json" ZB_FORK_DIR="$tmp/fakefork" "$wrap" --out "$tmp/timed.json" \
  >"$tmp/timed" 2>"$tmp/err"
checkf "a timed run: exit 0, the list beside it on the GPU's file" \
  '[[ $? -eq 0 ]] && grep -q "against the list on H100-SXM" "$tmp/timed" && [[ -s "$tmp/timed.compare.json" ]]' "$tmp/err"
env PATH="$tmp/bin:$PATH" RUN_JSON="$tmp/run.json" ZB_FORK_DIR="$tmp/fakefork" "$wrap" --out="$tmp/timed2.json" \
  >"$tmp/timed" 2>"$tmp/err"
check "a timed run whose GPU has no device file (--out=FILE): exit 0, the failed comparison said" \
  '[[ $? -eq 0 && -s "$tmp/timed2.json" && ! -e "$tmp/timed2.compare.json" ]] &&
   grep -q "the list.s prediction beside $tmp/timed2.json failed (the run.s JSON is kept)" "$tmp/err"'

if [[ -z "$py" ]]; then
  echo "skipped: zb_fork_layer.py's argument checks, CPU check and rehearsal (no python3 here imports torch)"
  exit $fail
fi
# Where setuptools no longer gives pkg_resources.packaging (70 and later) or is missing, the
# stand-in gives the name the fork imports at load time.
check "pkg_resources without packaging: the name given once, then left alone" "PYTHONPATH='$root/tools' '$py' -c \"
import sys
sys.modules['pkg_resources'] = None  # import pkg_resources now fails, as without setuptools
from stagecraft_tools import zb_fork_load as z
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
PYTHONPATH="$root/tools" "$py" -c "import sys; from stagecraft_tools import zb_fork_load as z; z.load_fork(sys.argv[1], cpu=False)" \
  "$fork/fork" >"$tmp/order" 2>&1
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
check "rehearsal: no comparison with the list (a toy shape on the CPU)" '[[ ! -e "$tmp/r.compare.json" ]]'
check "rehearsal: four models, fuser on and off" \
  '[[ $(grep -cE "^ +[0-9.]+B +(fused|unfused) +F [0-9.]+ +B [0-9.]+ +W [0-9.]+ ms per layer" "$tmp/rehearse") -eq 8 ]]'
# The paper's ratios beside each model are its profile's (Appendix D), recomputed here from the CSV.
check "rehearsal: the JSON, each model's stage and the paper's ratios" "python3 - '$tmp/r.json' '$root/data/zero_bubble_paper.csv' <<'PY'
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
