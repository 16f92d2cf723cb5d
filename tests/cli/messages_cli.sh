#!/usr/bin/env bash
# Messages that say what happened (docs/reliability.md): one line with the stagecraft: error:
# prefix, printed once per job (not once per rank), naming the path and the reason, with the
# bytes of user text that could drive a terminal escaped, and never a crash.
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/cli_lib.bash"
mpi="$root/scripts/mpirun.sh"
mlp="$root/scenarios/mlp-cpu.yaml"
gpt="$root/scenarios/gpt-tiny-cpu.yaml"
mkdir "$tmp/folder"

# ---- a folder or a device where a file is expected --------------------------------------------
expect_error "a folder as the scenario" "$tmp/folder: cannot read: is a directory" simulate "$tmp/folder"
expect_error "a folder as the topology" "--set topology: $tmp/folder: cannot read: is a directory" \
  simulate "$mlp" --set "topology=$tmp/folder"
expect_error "a folder as the profile" "--set model.profile: $tmp/folder: cannot read: is a directory" \
  simulate "$mlp" --set "model.profile=$tmp/folder"
expect_error "a folder as training.data" "training.data: $tmp/folder: cannot read: is a directory" \
  simulate "$gpt" --set "training.data=$tmp/folder"
expect_error "a folder as a metrics file" "$tmp/folder: cannot read: is a directory" compare "$tmp/folder" "$tmp/folder"
expect_error "an endless device as the scenario" "/dev/zero: cannot read: a character device, not a regular file" \
  simulate /dev/zero
expect_error "a missing scenario" "$tmp/none.yaml: cannot read: no such file or directory" simulate "$tmp/none.yaml"
printf 'name: one\n---\nname: two\n' >"$tmp/two.yaml"
expect_error "a second YAML document" "two.yaml:3:1: a second YAML document" simulate "$tmp/two.yaml"

# ---- commands and flags -------------------------------------------------------------------------
expect_error "an unknown command" "unknown command 'simulat' (commands: schedule, simulate, compare, replay, search, plan, execute, profile, devices)" \
  simulat "$mlp"

# ---- bytes that drive a terminal are escaped, in errors and in tables ---------------------------
expect_error "control bytes in a value" "unknown schedule '\\x1b[31mred\\xff'" simulate "$mlp" \
  --set $'pipeline.schedule=\x1b[31mred\xff'
check "no raw escape reached stderr" '! grep -q $'"'"'\x1b'"'"' "$tmp/err"'
out="$("$sc" simulate "$mlp" --set $'name=\x1b[31mred\xff' --set pipeline.schedule=1f1b)"
check "a scenario name with control bytes: escaped in the table" \
  '[[ "$(head -1 <<<"$out")" == "scenario \\x1b[31mred\\xff: 2 ranks"* ]]'

# ---- a schedule that deadlocks: one line, its code word once -----------------------------------
# Rank 0 sends its activation only after its backward, which needs rank 1's gradient of it.
printf '0F0,0RECV_B0,0B0,0SEND_F0\n1RECV_F0,1F0,1B0,1SEND_B0\n' >"$tmp/cycle.csv"
expect_error "a deadlocked file" "cycle.csv: 1 problem(s): deadlock: cycle of 5 ops: rank 0 #2 (0B0) -> rank 0 #3 (0SEND_F0)" \
  schedule --import "$tmp/cycle.csv"
check "the code word once" '! grep -q "deadlock: deadlock" "$tmp/err"'

# ---- under mpirun: bad input is one line per job, whatever the ranks ---------------------------
timeout 120 "$mpi" 2 "$sc" execute "$mlp" --set pipeline.microbatchs=3 >"$tmp/out" 2>"$tmp/err"
rc=$?
check "execute, 2 ranks, a bad key: non-zero exit ($rc)" '[[ $rc -ne 0 && $rc -ne 124 ]]'
checkf "execute, 2 ranks, a bad key: one stderr line" \
  '[[ $(wc -l <"$tmp/err") -eq 1 ]] && grep -q "^stagecraft: error: .*unknown key .microbatchs." "$tmp/err"' "$tmp/err"
timeout 120 "$mpi" 2 "$sc" execute "$gpt" --set "training.data=$tmp/folder" >"$tmp/out" 2>"$tmp/err"
rc=$?
checkf "execute, 2 ranks, a folder as training.data: one stderr line ($rc)" \
  '[[ $rc -ne 0 && $rc -ne 124 && $(wc -l <"$tmp/err") -eq 1 ]] && grep -q "is a directory" "$tmp/err"' "$tmp/err"
exit $fail
