// ZeRO-2 and ZeRO-3 (pipeline.zero: 2 | 3; docs/cost-model.md "Sharded data parallelism"):
// what sharding a stage's gradients, and its weights, over its data-parallel replicas costs and
// saves, for the transformer and roofline rows. Internal to sim/src.
//
// ZeRO-2 (DeepSpeed's stage 2, PyTorch FSDP's SHARD_GRAD_OP): each device keeps 1/D of the
// stage's gradients (the routed experts' 1/holders) beside ZeRO-1's share of the optimizer
// state; every backward reduce-scatters its gradients to their owners, and the REDUCE_GRAD
// before the STEP carries only the all-gather of the updated weights.
// ZeRO-3 (DeepSpeed's stage 3, PyTorch FSDP's FULL_SHARD, Megatron-FSDP's optim_grads_params):
// the weights too, 1/D a device; every forward all-gathers them layer by layer, every backward
// gathers them again and reduce-scatters its gradients, and the REDUCE_GRAD has nothing left.
// Each op runs its gathers and scatters on a stream beside its compute, one layer ahead: it takes
// the longer of the two, plus one layer's share of the collectives (the first gather, or the
// last scatter, has nothing to hide behind). While it runs it holds two layers' whole weights
// (the one computing and the one prefetched; a layer's: the stage's weights over its layers, the
// embedding or LM head spread over them). The collectives are rings over the stage's replicas
// (the routed experts' over their holders), folded into the op's time: they share no link with
// the pipeline's transfers in the simulation.
#pragma once

#include "analytical_costs.h"
#include "stagecraft/sim/cost_table.h"

namespace stagecraft::sim::detail {

// A stage's collectives per microbatch on one device (ns): the weights' all-gather (ZeRO-3: in
// F and again in a backward) and the gradients' reduce-scatter (ZeRO-2 and 3: in a backward),
// over `layers` layers (at least 1: one prefetch step).
struct ShardedComm {
  double gather_ns = 0;
  double scatter_ns = 0;
  int layers = 1;
};
ShardedComm ShardedCommOf(const Scenario& sc, int rank, const StageParams& params, int layers);

// The stage's memory with pipeline.zero >= 2 (gradients, and with 3 the weights, sharded; the
// gathered layers as workspace); nothing below 2.
void ShardStageMemory(const Scenario& sc, const StageParams& params, int layers, StageCost* cost);

// Its compute ops' times with `comm` beside them: F, I and W each the longer of its compute and
// its collectives plus one layer's share of them, a whole B likewise over the backward's.
void AddShardedComm(const ShardedComm& comm, StageCost* cost);

}  // namespace stagecraft::sim::detail
