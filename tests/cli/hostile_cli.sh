#!/usr/bin/env bash
# Hostile input to the inputs every command reads (issue 51): a FIFO or a device where a file
# belongs is refused before it is opened (no hang), `-` reads standard input, one rule for
# pipeline.chunks in every command, and the small messages (ranges, units, names, encodings,
# nesting) each one clear line. Every command that could block runs under a timeout, so a
# regression fails here instead of hanging the suite.
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/cli_lib.bash"
cp -r "$root/scenarios" "$tmp/sc"
uniform="$tmp/sc/uniform-costs.yaml"
mlp="$tmp/sc/mlp-cpu.yaml"
t() { timeout 20 "$sc" "$@"; }  # a command that must answer, not wait
not_regular="cannot read: a FIFO, not a regular file"

# ---- 1. a FIFO with no writer, everywhere one file is read --------------------------------------
mkfifo "$tmp/f" "$tmp/f.csv"
"$sc" simulate "$uniform" --set pipeline.schedule=1f1b --json "$tmp/m.json" --trace "$tmp/t.json" >/dev/null 2>&1
check "a metrics file and a trace to read" '[[ -s "$tmp/m.json" && -s "$tmp/t.json" ]]'
expect_command_error "simulate a FIFO" "$tmp/f: $not_regular" 1 t simulate "$tmp/f"
expect_command_error "compare a FIFO (predicted)" "$tmp/f: $not_regular" 1 t compare "$tmp/f" "$tmp/m.json"
expect_command_error "compare a FIFO (measured)" "$tmp/f: $not_regular" 1 t compare "$tmp/m.json" "$tmp/f"
expect_command_error "replay a FIFO run" "$tmp/f: $not_regular" 1 t replay "$tmp/f" --trace "$tmp/t.json"
expect_command_error "replay --trace a FIFO" "$tmp/f: $not_regular" 1 t replay "$tmp/m.json" --trace "$tmp/f"
expect_command_error "schedule --import a FIFO" "$tmp/f.csv: $not_regular" 1 t schedule --import "$tmp/f.csv"
expect_command_error "--set topology= a FIFO" "--set topology: $tmp/f: $not_regular" 1 \
  t simulate "$uniform" --set "topology=$tmp/f"
expect_command_error "--set model.profile= a FIFO" "--set model.profile: $tmp/f: $not_regular" 1 \
  t simulate "$mlp" --set "model.profile=$tmp/f"
expect_command_error "pipeline.schedule: a FIFO CSV" "--set pipeline.schedule: $tmp/f.csv: $not_regular" 1 \
  t simulate "$uniform" --set "pipeline.schedule=$tmp/f.csv"
expect_command_error "a device as the scenario" "/dev/zero: cannot read: a character device, not a regular file" 1 \
  t simulate /dev/zero
# A device named by --set is looked for beside the current folder first (devices/NAME.yaml).
in_sc() { local bin; bin="$(realpath "$sc")"; (cd "$tmp/sc" && timeout 20 "$bin" "$@"); }
mkfifo "$tmp/sc/devices/FIFO-GPU.yaml"
expect_command_error "a device file that is a FIFO" "device 'FIFO-GPU': devices/FIFO-GPU.yaml: $not_regular" 1 \
  in_sc simulate uniform-costs.yaml --set topology.device=FIFO-GPU
mkdir "$tmp/sc/devices/DIR-GPU.yaml"
expect_command_error "a device file that is a folder" "device 'DIR-GPU': devices/DIR-GPU.yaml: cannot read: is a directory" 1 \
  in_sc simulate uniform-costs.yaml --set topology.device=DIR-GPU
# `-` is standard input: the scenario piped in simulates as the file does.
t simulate "$uniform" --set pipeline.schedule=1f1b --json "$tmp/file.json" >/dev/null 2>&1
t simulate - --set pipeline.schedule=1f1b --json "$tmp/stdin.json" <"$uniform" >/dev/null 2>"$tmp/err"
checkf "simulate - reads standard input" '[[ $? -eq 0 ]]' "$tmp/err"
check "the piped scenario predicts what the file does" \
  '[[ "$(grep -o "\"step_time_ms\": *[0-9.e+-]*" "$tmp/stdin.json")" == "$(grep -o "\"step_time_ms\": *[0-9.e+-]*" "$tmp/file.json")" ]]'

# ---- 2. pipeline.chunks: one rule (a V schedule takes 2 when absent; a contradiction is an error)
for s in zb-v dualpipe-v; do
  out="$(t schedule --schedule "$s" --ranks 4 --microbatches 8 2>"$tmp/err")"
  checkf "schedule $s without --chunks: 2 per rank" '[[ "$out" == "$s: 4 ranks, 8 stages, 8 microbatches"* ]]' "$tmp/err"
done
expect_error "schedule zb-v --chunks 3" "zb-v runs two stages per rank in a V; chunks must be 2 (got 3)" \
  schedule --schedule zb-v --ranks 4 --microbatches 8 --chunks 3
expect_error "schedule --chunks 0" "--chunks" schedule --schedule 1f1b --ranks 4 --microbatches 8 --chunks 0
for s in interleaved zb-v dualpipe-v; do
  expect_error "$s with chunks 1" "--set pipeline.chunks: $s " simulate "$uniform" --set pipeline.schedule=$s --set pipeline.chunks=1
done
expect_error "1f1b with chunks 5" "--set pipeline.chunks: 5 stages per rank applies to the schedules that interleave" \
  simulate "$uniform" --set pipeline.schedule=1f1b --set pipeline.chunks=5
expect_error "zb-v with chunks 3" "--set pipeline.chunks: zb-v runs two stages per rank in a V; chunks must be 2 (got 3)" \
  simulate "$uniform" --set pipeline.schedule=zb-v --set pipeline.chunks=3
expect_error "all with chunks 4" "--set pipeline.chunks: 4 stage(s) per rank contradicts schedules of \`all\` (zb-v runs 2, dualpipe-v runs 2)" \
  simulate "$uniform" --set pipeline.chunks=4
out="$(t simulate "$uniform" --set pipeline.chunks=2 2>"$tmp/err")"
checkf "all with chunks 2: every schedule runs" '[[ $(grep -cE "^(gpipe|1f1b|pipedream|2bw|interleaved|zb-h1|zb-h2|zb-v|dualpipe-v) +[0-9.]+ ms" <<<"$out") -eq 9 ]]' "$tmp/err"
# A partition list names each stage of the schedules that run: zb-v's 16 on 8 ranks.
gpt="$tmp/sc/gpt-1.3b-8xh100.yaml"
sixteen="[$(printf '%s,' 1 1 1 1 1 1 1 1 2 2 2 2 2 2 2 | sed 's/,$//'),2]"
out="$(t simulate "$gpt" --set pipeline.schedule=zb-v --set "pipeline.partition=$sixteen" 2>"$tmp/err")"
checkf "zb-v takes a 16-stage list without chunks" '[[ "$out" == *"zb-v "* ]]' "$tmp/err"
expect_error "1f1b and a 16-stage list" "--set pipeline.partition: lists 16 stage(s), but 1f1b runs 8 (8 ranks, one stage per rank)" \
  simulate "$gpt" --set pipeline.schedule=1f1b --set "pipeline.partition=$sixteen"
expect_error "a 5-entry list" "lists 5 stage(s), but gpipe runs 8" \
  simulate "$gpt" --set 'pipeline.partition=[4,5,5,5,5]'
# One entry per rank serves every schedule of `all`: 8 of one stage per rank, 16 of two.
out="$(t simulate "$gpt" --set pipeline.schedule=all --set 'pipeline.partition=[2,3,3,3,3,3,3,4]' 2>"$tmp/err")"
checkf "all and a per-rank list: every schedule runs" \
  '[[ $(grep -cE "^(gpipe|1f1b|pipedream|2bw|interleaved|zb-h1|zb-h2|zb-v|dualpipe-v) +[0-9.]+ ms" <<<"$out") -eq 9 ]]' "$tmp/err"
expect_error "a rank with fewer layers than its stages" "gives rank 0 1 layer(s), fewer than the 2 stages per rank interleaved runs" \
  simulate "$gpt" --set pipeline.schedule=interleaved --set 'pipeline.partition=[1,3,3,3,3,3,4,4]'

# ---- 3. small messages ----------------------------------------------------------------------------
expect_error "--data-parallel 0: a short range" "--data-parallel: Value 0 not in range 1 to 65536" \
  schedule --schedule 1f1b --ranks 2 --microbatches 2 --data-parallel 0
check "--data-parallel 0: no 300 digits" '[[ $(wc -c <"$tmp/err") -lt 200 ]]'
expect_error "--schedule and --import together" "--schedule excludes --import" \
  schedule --schedule gpipe --import "$tmp/f.csv"
expect_error "a bandwidth of 0: its range, not its unit" "expected a bandwidth from 1KB/s to 10PB/s, got '0'" \
  simulate "$uniform" --set topology.links.0.bandwidth=0
expect_error "a misspelt device" "no device 'H100-SMX' in the device library" simulate "$uniform" --set topology.device=H100-SMX
check "a misspelt device: did you mean" 'grep -q "did you mean '"'"'H100-SXM'"'"'?" "$tmp/err"'
printf '\xef\xbb\xbf0F0,0F1,0B0,0B1\n1F0,1F1,1B0,1B1\n' >"$tmp/bom.csv"
out="$(t schedule --import "$tmp/bom.csv" --format csv 2>"$tmp/err")"
checkf "a CSV with a byte-order mark" '[[ "$out" == $'"'"'0F0,0F1,0B0,0B1\n1F0,1F1,1B0,1B1'"'"' ]]' "$tmp/err"
python3 -c 'print("name: deep\nx: " + "[" * 5000 + "]" * 5000)' >"$tmp/deep.yaml"
expect_error "deeply nested YAML" "deep.yaml:2:" simulate "$tmp/deep.yaml"
check "deeply nested YAML: says so" 'grep -q "levels deep, the YAML parser'"'"'s limit" "$tmp/err"'
printf 'name: nul\ntopology:\n  device: "a\0b"\n' >"$tmp/nul.yaml"
expect_error "a NUL byte" "nul.yaml:3:13: a NUL byte" simulate "$tmp/nul.yaml"

# ---- 4. search's numbers --------------------------------------------------------------------------
zb="$tmp/sc/zero-bubble-paper.yaml"
expect_error "search --evaluations 0" "--evaluations: Value 0 not in range" search "$zb" --evaluations 0 --out "$tmp/x.csv"
expect_error "search --budget 0" "--budget: 0 is not a number of seconds in (0, 86400]" search "$zb" --budget 0 --out "$tmp/x.csv"
expect_error "search --budget nan" "--budget: nan is not" search "$zb" --budget nan --out "$tmp/x.csv"
expect_error "search --seed -1" "--seed: Value -1 not in range" search "$zb" --seed -1 --out "$tmp/x.csv"
expect_error "search --memory-limit 1B" "within the memory limit (1 B per rank)" \
  search "$uniform" --memory-limit 1B --evaluations 5 --out "$tmp/x.csv"
check "search --memory-limit 1B: one short line" '[[ $(wc -c <"$tmp/err") -lt 400 ]] && ! grep -q "\\\\n" "$tmp/err"'
SECONDS=0
expect_error "search --trace -: no advice that cannot help" "--trace -: the start's and the result's traces go beside it" \
  search "$zb" --budget 60 --out "$tmp/x.csv" --trace -
check "search --trace -: no --set advice" '! grep -q -- "--set" "$tmp/err"'
check "search --trace -: refused before the 60 s search (${SECONDS} s)" '[[ $SECONDS -lt 30 ]]'
check "no output left by the failures" '[[ ! -e "$tmp/x.csv" ]]'
exit $fail
