#!/usr/bin/env bash
# Inputs whose cost is bounded (docs/reliability.md): values past their documented range and
# derived times past the simulator's limits are one line naming the key and the limit; a run
# too large to hold is refused by its estimate before anything is built, naming --max-ops, and
# runs when the limit is raised; 10^4 ranks simulate.
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/cli_lib.bash"
mlp="$root/scenarios/mlp-cpu.yaml"
uniform="$root/scenarios/uniform-costs.yaml"
gpt="$root/scenarios/gpt-1.3b-8xh100.yaml"

# ---- overflows of the int64 nanosecond clock, each one line naming the key --------------------
expect_error "peak of 1 FLOPS" "topology.device.peak: expected a compute rate from 1MFLOPS to 1EFLOPS, got '1FLOPS'" \
  simulate "$mlp" --set topology.device.peak=1FLOPS
expect_error "efficiency 1e-12" "topology.device.efficiency" simulate "$mlp" --set topology.device.efficiency=1e-12
expect_error "a forward of 1e9 s" "model.costs.forward: expected a duration of at most 3600s (1 h, the limit per op), got '1e9s'" \
  simulate "$uniform" --set model.costs.forward=1e9s
expect_error "a link latency of 1e9 s" "latency: expected a duration of at most 3600s" \
  simulate "$mlp" --set topology.links.0.latency=1e9s
expect_error "hidden 2^30" "model.mlp.hidden" simulate "$mlp" --set model.mlp.hidden=1073741824
expect_error "seq 2^30" "model.transformer.seq" simulate "$gpt" --set model.transformer.seq=1073741824
expect_error "a derived forward over an hour" "above the limit of 1 h per op" \
  simulate "$mlp" --set topology.device.peak=1MFLOPS --set model.mlp.hidden=65536
start=$SECONDS
expect_error "a run over a year" "1 year" simulate "$uniform" --set model.costs.forward=3600s \
  --set pipeline.microbatches=100000 --set pipeline.schedule=1f1b
check "a run over a year: refused at once ($((SECONDS - start)) s)" '[[ $((SECONDS - start)) -lt 10 ]]'

# ---- sizes refused by their estimate before anything is built ---------------------------------
start=$SECONDS
expect_error "a million microbatches" "gpipe with 4 ranks x 1000000 microbatches x 1 step: about 20000004 ops (about 4 GB to simulate), above the limit of 2e+07 ops; raise it with --max-ops N" \
  simulate "$uniform" --set pipeline.microbatches=1000000
expect_error "65,536 ranks" "1f1b with 65536 ranks x 64 microbatches x 1 step: about 2.5e+07 ops" \
  simulate "$uniform" --set pipeline.ranks=65536 --set topology.devices_per_node=65536 --set pipeline.microbatches=64 \
  --set pipeline.schedule=1f1b
expect_error "schedules held together" "the scenario's 2 schedules together: about 2.4e+07 ops" \
  simulate "$uniform" --set pipeline.microbatches=600000 --set 'pipeline.schedule=[gpipe, 1f1b]'
expect_error "schedule: 65,536 ranks x a million microbatches" "1f1b with 65536 ranks x 1000000 microbatches x 1 step: about 3.9e+11 ops (about 79 TB to simulate)" \
  schedule --schedule 1f1b --ranks 65536 --microbatches 1000000
expect_error "execute: a million microbatches" "1f1b with 1 ranks x 1000000 microbatches x 20 steps" \
  execute "$mlp" --set pipeline.ranks=1 --set pipeline.microbatches=1000000 --set pipeline.schedule=1f1b
expect_error "profile: calibration runs of a million microbatches" "x 1000000 microbatches x 10 steps" \
  profile "$mlp" --set pipeline.microbatches=1000000 --out "$tmp/p.yaml"
check "five refusals within seconds ($((SECONDS - start)) s)" '[[ $((SECONDS - start)) -lt 20 ]]'
check "no profile written" '[[ ! -e "$tmp/p.yaml" ]]'
expect_error "--max-ops below 1" "--max-ops: Value 0 not in range 1" simulate "$uniform" --max-ops 0
expect_error "a grid too large to show" "a grid of 10000 rows (ranks)" schedule --schedule 1f1b --ranks 10000 --microbatches 8
# Raised, the limit lets the same shape run (a smaller one here, to stay quick).
"$sc" simulate "$uniform" --set pipeline.microbatches=20000 --set pipeline.schedule=1f1b --max-ops 500000 >/dev/null 2>&1
check "a raised --max-ops lets a large run through" '[[ $? -eq 0 ]]'
expect_error "the same shape under a lower limit" "above the limit of 1e+05 ops" \
  simulate "$uniform" --set pipeline.microbatches=20000 --set pipeline.schedule=1f1b --max-ops 100000

# ---- 10^4 ranks: routes kept only for the pairs that talk --------------------------------------
out="$("$sc" simulate "$uniform" --set pipeline.ranks=10000 --set topology.devices_per_node=10000 \
  --set pipeline.schedule=1f1b 2>&1)"
check "10^4 ranks simulate" '[[ $? -eq 0 ]]'
# 1F1B with uniform costs and free transfers: (m + p - 1) x (F + B) = (8 + 9999) x 3 ms.
check "10^4 ranks: 1F1B's closed form" 'grep -qE "^1f1b +30021\.000 ms" <<<"$out"' || echo "$out"
exit $fail
