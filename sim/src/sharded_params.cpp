// ZeRO-2 and ZeRO-3 (sharded_params.h).
#include "sharded_params.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "stagecraft/sim/collectives.h"

namespace stagecraft::sim::detail {

namespace {

// The devices that hold the same routed experts as pipeline rank `rank`'s first device: of its
// D x C x T devices (tensor ranks innermost, as ParallelLayout::ExpertDevices folds them), every E-th.
std::vector<int> ExpertHolders(const ParallelLayout& p, int rank) {
  std::vector<int> holders;
  const int devices = p.replicas() * p.tensor_parallel;
  for (int k = 0; k < devices; k += p.expert_parallel)
    holders.push_back(p.DeviceOf(rank, k / p.tensor_parallel, k % p.tensor_parallel));
  return holders;
}

// A collective of `bytes` over `devices`, one pass (an all-gather or a reduce-scatter).
double OnePassNs(const Scenario& sc, double bytes, const std::vector<int>& devices) {
  return GroupPassNs(sc.topology, bytes, devices);
}

int64_t Rounded(double bytes) { return static_cast<int64_t>(std::llround(bytes)); }

}  // namespace

ShardedComm ShardedCommOf(const Scenario& sc, int rank, const StageParams& params, int layers) {
  const PipelineSpec& p = sc.pipeline;
  ShardedComm comm;
  comm.layers = std::max(layers, 1);
  if (p.zero < 2 || p.replicas() <= 1) return comm;
  const std::vector<int> replicas = p.ReplicaDevices()[static_cast<size_t>(rank)];
  // A reduce-scatter is one ring pass, as an all-gather (collectives.h RingPasses): the gradients'
  // at training.grad_dtype's bytes, the weights' at the dtype's.
  const auto pass = [&](double bytes_per_param) {
    return OnePassNs(sc, params.shared * bytes_per_param, replicas) +
           OnePassNs(sc, params.routed * bytes_per_param, params.routed > 0 ? ExpertHolders(p, rank) : std::vector<int>{});
  };
  comm.scatter_ns = pass(sc.training.GradBytes());
  comm.gather_ns = p.zero >= 3 ? pass(DtypeBytes(sc.training.dtype)) : 0.0;
  return comm;
}

void ShardStageMemory(const Scenario& sc, const StageParams& params, int layers, StageCost* cost) {
  const PipelineSpec& p = sc.pipeline;
  if (p.zero < 2 || p.replicas() <= 1) return;
  const double d = DtypeBytes(sc.training.dtype);
  const double shard = ShardOf(p, params);
  cost->grad_bytes = Rounded(shard * sc.training.GradBytes());
  if (p.zero >= 3) {
    cost->weight_bytes = Rounded(shard * d);
    cost->workspace_bytes += Rounded(2 * (params.shared + params.routed) * d / std::max(layers, 1));
  }
}

void AddShardedComm(const ShardedComm& comm, StageCost* cost) {
  if (comm.gather_ns <= 0 && comm.scatter_ns <= 0) return;
  const auto beside = [&](int64_t compute_ns, double comm_ns) {
    if (comm_ns <= 0) return compute_ns;
    return static_cast<int64_t>(
        std::llround(std::max(static_cast<double>(compute_ns), comm_ns) + comm_ns / comm.layers));
  };
  const int64_t backward = cost->FullBackwardNs();
  cost->forward_ns = beside(cost->forward_ns, comm.gather_ns);
  cost->backward_input_ns = beside(cost->backward_input_ns, comm.gather_ns);
  cost->backward_weight_ns = beside(cost->backward_weight_ns, comm.scatter_ns);
  cost->fused_backward_ns = beside(backward, comm.gather_ns + comm.scatter_ns);
}

}  // namespace stagecraft::sim::detail
