// What each stage of a pipeline costs per microbatch, and how its transfers and runtime behave:
// the one view of the cost models that the engine has (DESIGN.md §4, §9). A cost model
// (cost_models.h) fills it from a scenario; tests fill it by hand.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "stagecraft/scenario/fits.h"
#include "stagecraft/sim/stash.h"

namespace stagecraft::sim {

// What one stage costs per microbatch.
struct StageCost {
  int64_t forward_ns = 0;
  int64_t backward_input_ns = 0;  // a full backward B costs backward_input + backward_weight
  int64_t backward_weight_ns = 0;
  int64_t fused_backward_ns = 0;  // when > 0, what a full B costs instead of input + weight
  int64_t step_ns = 0;           // optimizer STEP of the stage's parameters (0: not modelled)
  int64_t version_copy_ns = 0;   // added to a STEP that must keep the old version (copy first)
  // PipeMare's correction (KeepsWeightVelocity, memory_model.h): added to a backward that spans
  // updates (schedules::CorrectionSpans), and the velocity's update added to every STEP.
  int64_t correction_ns = 0;
  int64_t velocity_ns = 0;
  int64_t activation_bytes = 0;  // stashed per microbatch from F until its B / I
  int64_t w_stash_bytes = 0;     // kept from I until W (inputs of the linear layers)
  // With recompute: what a B / I rebuilds from the stashed input and holds while it runs.
  int64_t recompute_bytes = 0;
  // What a compute op holds while it runs beyond what it keeps (its temporaries; 0: not modelled):
  // an F workspace_bytes, a backward (B, I or W) that and backward_extra_workspace_bytes more.
  // The last stage's F holds no more: the loss writes its gradient over the output it reads.
  int64_t workspace_bytes = 0;
  int64_t backward_extra_workspace_bytes = 0;
  int64_t BackwardWorkspace() const { return workspace_bytes + backward_extra_workspace_bytes; }
  int64_t weight_bytes = 0;      // one weight version
  int64_t grad_bytes = 0;
  // What its REDUCE_GRAD all-reduces over the D replicas when that is not grad_bytes (-1): with
  // expert parallelism, the routed experts' share counted as the bytes that take as long on that
  // ring as their own reduction over their holders.
  int64_t reduce_bytes = -1;
  int64_t ReduceBytes() const { return reduce_bytes >= 0 ? reduce_bytes : grad_bytes; }
  int64_t optimizer_bytes = 0;
  int64_t send_bytes = 0;  // activation / gradient sent to a neighbour stage per microbatch
  // Expert parallelism (pipeline.expert_parallel > 1): the all-to-alls an F's ALL_TO_ALL runs
  // (a dispatch and a combine per MoE layer), those of a backward for inputs' (and of the
  // forward it recomputes), and what one moves from each device of the expert group (its
  // (E - 1) / E leaves the device); 0: none.
  int32_t a2a_forward = 0;
  int32_t a2a_backward = 0;
  int64_t a2a_bytes = 0;

  // What a full backward B costs: fused_backward_ns when set, else input + weight.
  int64_t FullBackwardNs() const {
    return fused_backward_ns > 0 ? fused_backward_ns : backward_input_ns + backward_weight_ns;
  }
};

// How a MoE layer's dispatcher sends a device's routed tokens (pipeline.moe_dispatcher): each
// routed copy to its expert's device (Megatron-LM's all-to-all dispatcher), or with `dedup`
// DeepEP's: one copy per remote node holding any of a token's experts, over the NIC, forwarded
// inside that node over NVLink to each GPU holding one (DeepSeek-V3 report §3.2.2), and one copy
// per GPU inside its own node; routing taken as uniform over the experts.
struct AllToAllRouting {
  bool dedup = false;
  int experts = 0;  // routed experts of the layer
  int top_k = 1;
  double copies = 1;  // routed copies a device sends of each token: top_k x the capacity factor
  int node_limit = 0;  // a token's experts on at most this many of the group's nodes (0: any)
};

struct CostTable {
  static int64_t At(const std::vector<std::vector<int64_t>>& by_rank, int rank, int index) {
    if (rank < 0 || rank >= static_cast<int>(by_rank.size())) return -1;
    const std::vector<int64_t>& ops = by_rank[static_cast<size_t>(rank)];
    return index >= 0 && index < static_cast<int>(ops.size()) ? ops[static_cast<size_t>(index)] : -1;
  }

  std::vector<StageCost> stages;  // indexed by stage
  // pipeline.offload.optimizer: host (cost_models.h PlaceOptimizerOnHost): every stage's optimizer
  // state, a copy of its weights and a gradient buffer live in host memory, not its optimizer
  // state on the device; each STEP's step_ns is the host's (its copies included).
  bool optimizer_on_host = false;
  // training.pipemare.correction: a schedule whose weight policy is correctable (weight_policy.h,
  // PipeMare's) keeps one more weight-sized buffer per stage, the weights' velocity.
  bool weight_velocity = false;
  // pipeline.a2a_overlap: an overlapped F&B pair runs its ALL_TO_ALLs beside its computation
  // (all_to_all.h), which then has 1 - a2a_sm_share of the device; false: they wait as any.
  bool a2a_overlap = false;
  double a2a_sm_share = 0;
  // pipeline.grad_reduce_overlap: a REDUCE_GRAD posted after its stage's last backward is left
  // only the part of its all-reduce that the backward's time alone did not cover
  // (collective_streams.h).
  bool grad_reduce_overlap = false;
  AllToAllRouting a2a_routing;
  int64_t p2p_latency_ns = 0;     // added per hop on top of the topology's route
  std::string source;             // the cost model's label: "explicit" | "transformer" | "mlp" | "profile:<path>"
  // The runtime's work per op of a rank's list (the stream is held that long after each op,
  // unless it waits for an input anyway), by rank when known.
  int64_t op_overhead_ns = 0;
  std::vector<int64_t> rank_op_overhead_ns;
  // How much a compute op's time varies from one run of it to the next (coefficient of
  // variation): with op_time_cv > 0 each op's time is its cost times a log-normal draw of mean
  // 1 and that spread, fixed by the seed and the op's place (simulate twice, get the same run).
  double op_time_cv = 0;
  uint64_t op_time_seed = 1;
  // How each rank's compute ops slow with the activations it holds (stash.h), by rank; empty:
  // they do not. Measured ops (op_ns) keep their own times.
  std::vector<StashScale> rank_stash;
  // Measured durations of individual compute ops (a replayed run, `stagecraft replay`): by rank
  // and op index in the rank's IR list, -1 where the stage's cost applies. Empty: none.
  std::vector<std::vector<int64_t>> op_ns;
  // The runtime's work measured before individual compute ops (a replayed run: the overhead part
  // of the gap before each, schedules::SplitBubbles), by rank and op index, in place of the owed
  // per-op overhead; -1 or empty: OverheadOf(rank) per op.
  std::vector<std::vector<int64_t>> overhead_ns;
  // And of its transfers: by the SEND's rank and op index, from both ends posted to the
  // receiver seeing the data (no link shared); -1 or empty: modelled.
  std::vector<std::vector<int64_t>> transfer_ns;
  // Measured transfers in place of the topology's links.
  std::optional<P2pFit> p2p;
  // A measured all-reduce in place of the collective plans over the links (collective_streams.h).
  std::optional<CollectiveFit> allreduce;

  // The measured duration of op `index` of `rank` (op_ns, or transfer_ns for a SEND), or -1.
  int64_t MeasuredOpNs(int rank, int index) const { return At(op_ns, rank, index); }
  int64_t MeasuredTransferNs(int rank, int index) const { return At(transfer_ns, rank, index); }
  int64_t MeasuredOverheadNs(int rank, int index) const { return At(overhead_ns, rank, index); }

  int64_t OverheadOf(int rank) const {
    return rank >= 0 && rank < static_cast<int>(rank_op_overhead_ns.size()) ? rank_op_overhead_ns[rank]
                                                                            : op_overhead_ns;
  }
};

}  // namespace stagecraft::sim
