#!/usr/bin/env bash
# The default scenario as the main job runs it: every schedule trains the MLP on 2 MPI ranks for
# 20 steps and its loss falls (the last step's mean loss at most 95% of the first's; flush
# schedules, PipeDream, 2BW and PipeMare alike).
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/cli_lib.bash"
timeout 600 "$root/scripts/mpirun.sh" 2 "$sc" execute "$root/scenarios/mlp-cpu.yaml" --json "$tmp/m.json" >"$tmp/out" 2>&1
rc=$?
check "default scenario executes" '[[ $rc -eq 0 ]]'
[[ $rc -eq 0 ]] || tail -20 "$tmp/out"
python3 - "$tmp/m.json" <<'PY' || fail=1
import json, sys
m = json.load(open(sys.argv[1]))
every = ["gpipe", "1f1b", "pipedream", "2bw", "pipemare", "interleaved", "zb-h1", "zb-h2", "zb-v", "dualpipe-v"]
ok = sorted(s["schedule"] for s in m["schedules"]) == sorted(every)
if not ok:
    print("FAIL: every generator runs:", [s["schedule"] for s in m["schedules"]])
for s in m["schedules"]:
    l = s["losses"]
    falls = len(l) == 20 and l[-1] <= 0.95 * l[0]
    print(f'{s["schedule"]:12} loss {l[0]:.6f} -> {l[-1]:.6f} ({100 * (l[-1] / l[0] - 1):+.1f}%)', "" if falls else "FAIL")
    ok &= falls
sys.exit(0 if ok else 1)
PY
exit $fail
