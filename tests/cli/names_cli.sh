#!/usr/bin/env bash
# A scenario name with quotes, a backslash, non-ASCII (ü, →) and control characters (a tab,
# \x01) through `simulate --json`, `--trace` and `compare`: every file is valid JSON and gives
# the name back exactly. (The viewer's loader and `execute --json` have their own tests:
# tests/viz/trace_set_test.cpp, tests/cli/execute_cli.sh.)
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/cli_lib.bash"

# The name in YAML's double-quoted form, and as it must come back.
yaml_name='"odd \"quoted\" back\\slash \u00fc \u2192 tab\there \x01 end"'
want=$'odd "quoted" back\\slash \xc3\xbc \xe2\x86\x92 tab\there \x01 end'  # bytes: whatever the locale
sed "s/^name: .*/name: ${yaml_name//\\/\\\\}/" "$root/scenarios/uniform-costs.yaml" >"$tmp/odd.yaml"

"$sc" simulate "$tmp/odd.yaml" --set 'pipeline.schedule=[gpipe, 1f1b]' --json "$tmp/p.json" \
  --trace "$tmp/p.trace.json" >"$tmp/out"
rc=$?
check "simulate runs" '[[ $rc -eq 0 ]]'
# The table is read on a terminal: its tab and control byte are written as escapes.
shown=$'odd "quoted" back\\slash \xc3\xbc \xe2\x86\x92 tab\\there \\x01 end'
check "table names the scenario, escaped" '[[ "$(head -n 1 "$tmp/out")" == "scenario $shown: "* ]]'
check "json and traces: valid JSON, the name exactly" "python3 - \"\$tmp\" \"\$want\" <<'PY'
import json, sys
tmp, want = sys.argv[1], sys.argv[2]
m = json.load(open(f'{tmp}/p.json', encoding='utf-8'))
assert m['scenario'] == want, repr(m['scenario'])
for s in ('gpipe', '1f1b'):
    t = json.load(open(f'{tmp}/p.trace.{s}.json', encoding='utf-8'))
    assert t['stagecraft']['scenario'] == want, repr(t['stagecraft']['scenario'])
    assert t['stagecraft']['summary']['schedule'] == s
PY"

cp "$tmp/p.json" "$tmp/p2.json"  # compare refuses one file given as both
"$sc" compare "$tmp/p.json" "$tmp/p2.json" --json "$tmp/c.json" >"$tmp/cmp"
rc=$?
check "compare reads the file" '[[ $rc -eq 0 ]]'
check "compare prints the name exactly" 'grep -qxF "predicted: $tmp/p.json (scenario $want)" "$tmp/cmp"'
check "compare --json is valid JSON" 'python3 -c "import json,sys; json.load(open(sys.argv[1]))" "$tmp/c.json"'
exit $fail
