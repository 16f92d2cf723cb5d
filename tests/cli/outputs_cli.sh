#!/usr/bin/env bash
# Outputs that never destroy (docs/reliability.md): for simulate, execute and profile, a
# symbolic link is followed and stays a link, a FIFO and /dev/null are written in place, `-` is
# standard output (the table then goes to stderr), every output path is checked before any
# work, and a command that fails leaves no new output file.
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/cli_lib.bash"
mpi="$root/scripts/mpirun.sh"
scenario="$root/scenarios/mlp-cpu.yaml"
one=(--set pipeline.schedule=1f1b)
tiny=(--set model.mlp.hidden=16 --set pipeline.microbatch_size=4 --set pipeline.steps=2 --set pipeline.microbatches=4
      --set pipeline.schedule=1f1b)
valid_json() { python3 -c 'import json, sys; json.load(open(sys.argv[1]))' "$1" 2>/dev/null; }

# ---- simulate ---------------------------------------------------------------------------------
cd "$tmp"
ln -s target.json dangling.json
"$sc" simulate "$scenario" --json dangling.json >/dev/null 2>&1
check "simulate: a dangling link stays a link" '[[ -L dangling.json ]]'
check "simulate: its target is written" 'valid_json target.json'
echo old >existing.json; chmod 600 existing.json; ln -s existing.json to-existing.json
"$sc" simulate "$scenario" --json to-existing.json >/dev/null 2>&1
check "simulate: a link to a file stays a link" '[[ -L to-existing.json ]]'
check "simulate: the file it names is replaced" 'valid_json existing.json'
check "simulate: the replaced file keeps its mode" '[[ $(stat -c %a existing.json) == 600 ]]'

mkfifo pipe
cat pipe >from-pipe.json &
reader=$!
timeout 60 "$sc" simulate "$scenario" --json pipe >/dev/null 2>&1
rc=$?
wait "$reader"
check "simulate: a FIFO is written ($rc)" '[[ $rc -eq 0 ]] && valid_json from-pipe.json'
check "simulate: the FIFO stays a FIFO" '[[ -p pipe ]]'
"$sc" simulate "$scenario" "${one[@]}" --trace /dev/null --json /dev/null >/dev/null 2>&1
check "simulate: /dev/null takes --json and --trace" '[[ $? -eq 0 && -c /dev/null ]]'

"$sc" simulate "$scenario" --json - >stdout.json 2>stderr.txt
check "simulate --json -: the JSON alone on stdout" 'valid_json stdout.json'
check "simulate --json -: the table on stderr" 'grep -q "^fastest that fits" stderr.txt'
"$sc" simulate "$scenario" --json /dev/stdout 2>/dev/null | python3 -c 'import json, sys; json.load(sys.stdin)'
check "simulate --json /dev/stdout into a pipe: the JSON alone" '[[ $? -eq 0 ]]'
"$sc" simulate "$scenario" "${one[@]}" --trace - >trace.json 2>/dev/null
check "simulate --trace - (one schedule): the trace on stdout" 'valid_json trace.json'

touch err  # expect_error's own file
before="$(ls)"
expect_error "simulate: several traces onto stdout" "--trace -: 10 schedules write a trace each, and a stream takes one" \
  simulate "$scenario" --trace -
expect_error "simulate: several traces onto a device" "--trace /dev/null: 10 schedules write a trace each" \
  simulate "$scenario" --trace /dev/null
check "simulate: nothing made in /dev" '[[ ! -e /dev/null.gpipe ]]'
expect_error "simulate: a failing trace path" "--trace missing-dir/t.json: cannot write: folder missing-dir: no such file or directory" \
  simulate "$scenario" --json new.json --trace missing-dir/t.json
check "simulate: the failed command left no --json" '[[ ! -e new.json ]]'
expect_error "simulate: a directory as --json" "--json $tmp: cannot write: is a directory" simulate "$scenario" --json "$tmp"
expect_error "simulate: one file named twice" "--json same.json and --trace same.json name the same file" \
  simulate "$scenario" "${one[@]}" --json same.json --trace same.json
expect_error "simulate: bad input after good outputs" "pipeline.microbatches" \
  simulate "$scenario" --set pipeline.microbatches=0 --json new.json --trace new.trace.json
check "simulate: failures left no file behind" '[[ "$(ls)" == "$before" ]]'
if [[ $(id -u) -ne 0 ]]; then
  mkdir locked; chmod 500 locked
  expect_error "simulate: a folder without write permission" "cannot write: folder locked: permission denied" \
    simulate "$scenario" --json locked/x.json
  chmod 700 locked; rmdir locked
fi

# ---- profile: its --out is checked before it measures anything --------------------------------
expect_error "profile: a missing folder" "--out missing-dir/p.yaml: cannot write: folder missing-dir" \
  profile "$scenario" "${tiny[@]}" --set pipeline.ranks=1 --out missing-dir/p.yaml
"$sc" profile "$scenario" "${tiny[@]}" --set pipeline.ranks=1 --repeats 1 --warmup 0 --out - >profile.yaml 2>report.txt
check "profile --out -: the profile alone on stdout" \
  'python3 -c "import sys; t = open(sys.argv[1]).read(); sys.exit(not t.startswith(\"device:\") or \"layer \" in t)" profile.yaml'
check "profile --out -: the report on stderr" 'grep -q "^profile of " report.txt'

# ---- execute: outputs checked before training; OUT.partial beside the link's target -----------
start=$SECONDS
timeout 120 "$mpi" 2 "$sc" execute "$scenario" "${tiny[@]}" --json missing-dir/m.json >out.txt 2>err.txt
rc=$?
check "execute: a bad --json fails ($rc)" '[[ $rc -ne 0 && $rc -ne 124 ]]'
check "execute: once, before any step" \
  '[[ $(grep -c "stagecraft: error: --json missing-dir/m.json: cannot write: folder missing-dir" err.txt) -eq 1 ]] && ! grep -q " step " out.txt'
timeout 120 "$mpi" 2 "$sc" execute "$scenario" "${tiny[@]}" --json ok.json --trace missing-dir/t.json >out.txt 2>err.txt
check "execute: a bad --trace fails before any step, leaving no JSON" \
  '[[ $? -ne 0 ]] && grep -q "cannot write: folder missing-dir" err.txt && ! grep -q " step " out.txt && [[ ! -e ok.json && ! -e ok.json.partial ]]'
echo "execute: two refused runs took $((SECONDS - start)) s"

mkdir runs; ln -s runs/measured.json m-link.json
timeout 120 "$mpi" 2 "$sc" execute "$scenario" "${tiny[@]}" --json m-link.json >/dev/null 2>err.txt
rc=$?
checkf "execute: through a link, exit 0 ($rc)" '[[ $rc -eq 0 ]]' err.txt
check "execute: the link stays a link, its target written" '[[ -L m-link.json ]] && valid_json runs/measured.json'
check "execute: no progress file is left" '[[ ! -e runs/measured.json.partial && ! -e m-link.json.partial ]]'
timeout 120 "$mpi" 2 "$sc" execute "$scenario" "${tiny[@]}" --json - >stdout.json 2>stderr.txt
check "execute --json -: the JSON alone on stdout" 'valid_json stdout.json'
check "execute --json -: the step lines and the table on stderr" \
  'grep -q "^1f1b .* step 2/2" stderr.txt && grep -q "^schedule .*step time" stderr.txt'
exit $fail
