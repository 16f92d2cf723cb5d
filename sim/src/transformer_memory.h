// What a transformer stage keeps per microbatch (transformer_memory.cpp). Internal to sim/src.
#pragma once

#include "analytical_costs.h"
#include "cost_checks.h"
#include "stagecraft/sim/cost_table.h"

namespace stagecraft::sim::detail {

// What stage `layers` keeps per microbatch into `cost`: Korthikanti's activations (16-bit bytes
// scaled to the dtype, less what a selective recompute's modules drop; the logits' gradient, its
// vocabulary share, kept from F to the backward on the last stage), what a full recompute
// rebuilds one layer at a time, the W stash (tensor-parallel, the attention output's and
// feed-forward down-projection's inputs split; with sequence parallelism all of them; a MoE layer
// is sequence-parallel, Validate), and with context parallelism the key-value buffers of the
// attention that runs.
void SetKeptBytes(const Scenario& sc, bool last, const StageLayers& layers, const StageChecks& check, StageCost* cost);

}  // namespace stagecraft::sim::detail
