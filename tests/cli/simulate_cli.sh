#!/usr/bin/env bash
# `stagecraft simulate` as a user runs it: the table, --json/--trace determinism, and bad input
# (one stderr line naming where and what, non-zero exit, no output file left behind).
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/cli_lib.bash"

cat >"$tmp/ok.yaml" <<'YAML'
name: uniform
topology:
  device: {name: test, peak: 100TFLOPS, memory: 80GiB, efficiency: 0.5}
  nodes: 1
  devices_per_node: 4
  links:
    - {scope: node, bandwidth: 100GB/s, latency: 0us}
model:
  costs: {forward: 1ms, backward_input: 1ms, backward_weight: 1ms, p2p_latency: 0us,
          activation_bytes: 1MiB, weight_bytes: 10MiB}
pipeline:
  schedule: [gpipe, 1f1b]
  ranks: 4
  microbatches: 8
  steps: 1
YAML
out="$("$sc" simulate "$tmp/ok.yaml" --json "$tmp/a.json" --trace "$tmp/a.trace.json")"; rc=$?
check "simulate runs" '[[ $rc -eq 0 ]]'
check "table has gpipe row" 'grep -qE "^gpipe +33\.000 ms" <<<"$out"'
check "table bubble 3/11" 'grep -qE "^1f1b .* 27\.27%" <<<"$out"'
check "json written" '[[ -s "$tmp/a.json" ]] && grep -q "\"bubble_fraction\":0.272727273" "$tmp/a.json"'
check "one trace per schedule" '[[ -s "$tmp/a.trace.gpipe.json" && -s "$tmp/a.trace.1f1b.json" ]]'
"$sc" simulate "$tmp/ok.yaml" --json "$tmp/b.json" --trace "$tmp/b.trace.json" >/dev/null
check "deterministic json" 'cmp -s "$tmp/a.json" "$tmp/b.json"'
check "deterministic trace" 'cmp -s "$tmp/a.trace.1f1b.json" "$tmp/b.trace.1f1b.json"'
out2="$("$sc" simulate "$tmp/ok.yaml" --set pipeline.microbatches=16 --set 'pipeline.schedule=[1f1b]')"
check "--set overrides" 'grep -qE "^1f1b +57\.000 ms" <<<"$out2"'
# pipeline.chunks belongs to interleaved: listed next to 1f1b, both run (1f1b on one stage per rank).
out3="$("$sc" simulate "$tmp/ok.yaml" --set 'pipeline.schedule=[1f1b, interleaved]' --set pipeline.chunks=2)"
# Receives in lock step (torch.distributed.pipelining's rule) give the same closed-form 33 ms here.
out4="$("$sc" simulate "$tmp/ok.yaml" --set pipeline.p2p=lockstep)"
check "p2p lockstep runs" 'grep -qE "^1f1b +33\.000 ms" <<<"$out4"'
# Two replicas on 8 devices of 100 GB/s: each STEP first all-reduces the 10 MiB of gradients (a
# ring of 2 moves 10 MiB each way: 0.105 ms), after rank 0's last backward: 33 + 0.105 ms. A
# schedule file gets its REDUCE_GRADs as the generator's schedule does.
"$sc" schedule --schedule 1f1b --ranks 4 --microbatches 8 --format csv --comms >"$tmp/f1b.csv"
out5="$("$sc" simulate "$tmp/ok.yaml" --set topology.devices_per_node=8 --set pipeline.data_parallel=2 \
  --set "pipeline.schedule=[1f1b, $tmp/f1b.csv]")"
check "data parallel: all-reduce after the last backward" 'grep -qE "^1f1b +33\.105 ms" <<<"$out5"'
check "data parallel: schedule file gets its REDUCE_GRADs" 'grep -qE "f1b\.csv +33\.105 ms" <<<"$out5"'
check "data parallel: the all-reduce's plan and least time" \
  'grep -qF "gradient all-reduce over 2 replicas, a stage'"'"'s alone: up to 0.105 ms (ring, stage 0 of 1f1b)" <<<"$out5"'
check "one replica: no all-reduce line" '! grep -q "gradient all-reduce" <<<"$out"'
check "data parallel: throughput counts both replicas" 'grep -qE "^1f1b .* 483\.[0-9] samples/s" <<<"$out5"'
check "chunks apply to interleaved only" 'grep -qE "^1f1b +33\.000 ms" <<<"$out3" && grep -qE "^interleaved +28\.500 ms" <<<"$out3"'

# bad NAME EXPECTED YAML|- [ARGS...]: the scenario fails with one clear line and leaves no --json file.
bad() {
  local name="$1" expect="$2" yaml="$3"; shift 3
  [[ "$yaml" == "-" ]] || printf '%s\n' "$yaml" >"$tmp/bad.yaml"
  rm -f "$tmp/out.json"
  expect_error "$name" "$expect" simulate "$tmp/bad.yaml" --json "$tmp/out.json" "$@"
  check "$name: no partial output" '[[ ! -e "$tmp/out.json" ]]'
}
# Shared cores: one warning line on stderr when a CPU scenario puts more ranks on one node than
# this machine has cores, none otherwise (and none for a scenario of other hardware).
cores="$(nproc)"; over=$((cores + 1))
err="$("$sc" simulate "$tmp/ok.yaml" --set topology.device.name=cpu-core --set pipeline.ranks=$over \
        --set topology.devices_per_node=$over 2>&1 >/dev/null)"; rc=$?
check "more ranks than cores: still runs" '[[ $rc -eq 0 ]]'
check "more ranks than cores: one warning line" \
  '[[ $(wc -l <<<"$err") -eq 1 ]] && grep -q "^warning: $over ranks on one node but this machine has $cores cores" <<<"$err"'
err="$("$sc" simulate "$tmp/ok.yaml" --set topology.device.name=cpu-core --set pipeline.ranks=1 2>&1 >/dev/null)"
check "one rank: no warning" '[[ -z "$err" ]]'
err="$("$sc" simulate "$tmp/ok.yaml" --set pipeline.ranks=$over --set topology.devices_per_node=$over 2>&1 >/dev/null)"
check "not this machine's hardware: no warning" '[[ -z "$err" ]]'

base="$(cat "$tmp/ok.yaml")"
rm -f "$tmp/bad.yaml"
bad "missing file" "bad.yaml: cannot read: no such file or directory" -
bad "malformed yaml" "bad.yaml:4:1: end of sequence flow not found" $'name: x\ntopology: {device: [\n'
bad "unknown key" "bad.yaml:14:3: pipeline: unknown key 'microbatchs'" "${base/  microbatches: 8/  microbatchs: 8}"
bad "negative size" "bad.yaml:10:" "${base/activation_bytes: 1MiB/activation_bytes: -1MiB}"
bad "zero ranks" "bad.yaml:" "${base/ranks: 4/ranks: 0}"
bad "interleaved needs rounds of microbatches" "divide into max(1, microbatches / ranks) = 2 rounds" "${base/schedule: \[gpipe, 1f1b\]/schedule: interleaved}" --set pipeline.microbatches=9 --set pipeline.chunks=2
bad "cost list wrong length" "expected 4 entries" "${base/forward: 1ms/forward: [1ms, 2ms]}"
bad "fewer devices than ranks" "devices" "${base/devices_per_node: 4/devices_per_node: 2}"
bad "bad --set key" "microbatchs" "$base" --set pipeline.microbatchs=3
bad "bad p2p" "pipeline.p2p: expected one of ahead, lockstep, got 'eager'" "$base" --set pipeline.p2p=eager
exit $fail
