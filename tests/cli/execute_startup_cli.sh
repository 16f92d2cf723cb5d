#!/usr/bin/env bash
# Start-up that fails on one rank alone (a GPU that cannot be made current, NCCL that cannot
# connect) ends the whole job, on the CPU through the test hook STAGECRAFT_FAIL_STARTUP_ON_RANK
# (cli/src/command_support.h), 2 ranks under scripts/mpirun.sh: a rank that throws while making
# its device or its transport; a rank that hangs there (its peer gives up after --timeout); a
# malformed hook. Each: non-zero exit well before the timeout's kill, the cause once, no output.
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/cli_lib.bash"
mpi="$root/scripts/mpirun.sh"
scenario="$root/scenarios/mlp-cpu.yaml"
small=(--set model.mlp.hidden=32 --set pipeline.microbatch_size=8 --set pipeline.steps=2
       --set pipeline.microbatches=4 --set pipeline.schedule=1f1b)

# start_fail NAME HOOK EXPECTED MAX_S COMMAND ARGS...: under the hook, the job exits non-zero
# within MAX_S seconds (the deadline is 120 s unless ARGS say less), the one error line of the
# job holds EXPECTED, and no output file is left.
start_fail() {
  local name="$1" hook="$2" expect="$3" max_s="$4" command="$5"; shift 5
  local before=$fail out=()
  fail=0
  rm -f "$tmp/out.json" "$tmp/out.yaml"
  if [[ "$command" == execute ]]; then out=(--json "$tmp/out.json"); else out=(--out "$tmp/out.yaml"); fi
  if [[ "$command" == execute && " $* " != *" --timeout "* ]]; then out+=(--timeout 120s); fi
  local start_ns; start_ns=$(date +%s%N)
  STAGECRAFT_FAIL_STARTUP_ON_RANK="$hook" timeout 200 "$mpi" 2 "$sc" "$command" "$scenario" "${small[@]}" \
    "${out[@]}" "$@" >"$tmp/sout" 2>"$tmp/serr"
  local rc=$?
  local ms=$(( ($(date +%s%N) - start_ns) / 1000000 ))
  echo "$name: exit $rc after $ms ms"
  check "$name: non-zero exit" '[[ $rc -ne 0 ]]'
  check "$name: no hang (exit $rc)" '[[ $rc -ne 124 && $rc -ne 137 ]]'
  check "$name: over within $max_s s ($ms ms)" '[[ $ms -lt $((max_s * 1000)) ]]'
  check "$name: the cause, once" '[[ $(grep -c "stagecraft: error: .*$expect" "$tmp/serr") -eq 1 ]]'
  check "$name: one error line for the job" '[[ $(grep -c "stagecraft: error:" "$tmp/serr") -eq 1 ]]'
  check "$name: nothing written" '[[ ! -e "$tmp/out.json" && ! -e "$tmp/out.yaml" ]]'
  check "$name: no step ran" '! grep -q " step [0-9]/" "$tmp/sout"'
  [[ $fail -eq 0 ]] || { echo "--- stderr of $name:"; cat "$tmp/serr"; }
  [[ $before -eq 0 ]] || fail=1
}

# The same job without the hook runs: what fails below is the fault, not the job.
timeout 200 "$mpi" 2 "$sc" execute "$scenario" "${small[@]}" --json "$tmp/ok.json" >"$tmp/sout" 2>"$tmp/serr"
rc=$?
check "no fault: exit 0 and a JSON" '[[ $rc -eq 0 && -s "$tmp/ok.json" ]]'
[[ $rc -eq 0 ]] || cat "$tmp/serr"

start_fail "rank 1 fails making its device" 1 \
  "rank 1 ([^)]*): start-up failed making the device: injected start-up fault (STAGECRAFT_FAIL_STARTUP_ON_RANK=1," \
  30 execute
start_fail "rank 0 fails connecting the ranks" 0:transport \
  "rank 0 ([^)]*): start-up failed connecting the ranks: injected start-up fault" 30 execute
start_fail "profile: rank 1 fails making its device" 1:device "rank 1 ([^)]*): start-up failed making the device" \
  30 profile
# A rank that hangs while making its device: its peer's agreement runs into --timeout 2s, and
# the peer names what it waited for and ends the job.
start_fail "rank 1 hangs making its device" 1:device:hang \
  "rank 0 ([^)]*): start-up: waiting for the other ranks to finish making the device: .*did not complete within 2 s" \
  15 execute --timeout 2s
# Every rank reads the same malformed hook: one line for the job, naming both ranks.
start_fail "a malformed hook" 1:gpu \
  "ranks 0, 1 ([^)]*): start-up failed making the device: STAGECRAFT_FAIL_STARTUP_ON_RANK='1:gpu': expected" \
  30 execute
start_fail "a hook naming no rank of the job" 2 "STAGECRAFT_FAIL_STARTUP_ON_RANK='2': expected .* (0..1)" 30 execute
exit $fail
