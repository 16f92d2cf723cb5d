// Where a job's processes run (Megatron-LM's parallel layout): the pipeline's ranks, the data,
// context, tensor and expert parallel degrees, how the devices are numbered (scenario.h's
// PipelineSpec holds it; parallel_layout.cpp).
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "stagecraft/scenario/enum_names.h"

namespace stagecraft::sim {

// The axes of the job's grid of devices.
enum class Axis { kTensor, kData, kPipeline };
inline constexpr EnumName<Axis> kAxisNames[] = {{Axis::kTensor, "tensor"}, {Axis::kData, "data"},
                                                {Axis::kPipeline, "pipeline"}};
constexpr std::string_view Name(Axis axis) { return NameIn(kAxisNames, axis); }

// Where the job's processes run (Megatron-LM's parallel layout): the pipeline's ranks, D replicas
// of the pipeline, each stage's layers sharded over T devices, how the devices are numbered and
// how many pipeline ranks share one device.
struct ParallelLayout {
  int ranks = 0;  // pipeline ranks (stages of one replica, before chunks)
  // D replicas of the pipeline, each stage's layers sharded over T devices (with sequence
  // parallelism, the activations between them too), and with zero = 1 the optimizer state
  // sharded over the D replicas (ZeRO-1).
  int data_parallel = 1;
  int tensor_parallel = 1;
  bool sequence_parallel = false;
  // C (pipeline.context_parallel): each sequence split over C devices, s / C tokens each (two
  // chunks from both ends), attending to the whole sequence's keys, which reach them round a ring
  // beside the attention (Transformer Engine's p2p) or, with context_all_gather, all-gathered
  // before it (pipeline.context_parallel_comm all_gather: the Llama 3 paper's). The C devices hold
  // the same weights: gradients and ZeRO over D x C. Megatron's order: tensor, context, data.
  int context_parallel = 1;
  bool context_all_gather = false;
  // With T > 1 and the roofline model: a backward run as one op (B) starts each column-parallel
  // layer's input-gradient all-reduce (reduce-scatter) before its weight GEMM and runs the two
  // side by side (Megatron-LM's asynchronous tensor-parallel all-reduce, which Korthikanti et
  // al. 2022 describe; SC'21 describes none). Split I and W ops are unchanged.
  bool tensor_parallel_overlap = false;
  // pipeline.grad_reduce_overlap: a stage's data-parallel gradient reduce runs beside its last
  // backward of the update, as Megatron-LM's --overlap-grad-reduce launches each bucket's reduce
  // once the backward has produced it; only what the backward does not cover is left after it.
  bool grad_reduce_overlap = false;
  // pipeline.param_gather_overlap (ZeRO-1, 2): the updated weights' all-gather runs beside the next
  // step's forwards (Megatron-LM's --overlap-param-gather) and is not charged to the REDUCE_GRAD.
  bool param_gather_overlap = false;
  int zero = 0;
  // E (pipeline.expert_parallel): a MoE layer's experts sharded over E of the D x T devices that
  // hold a stage (Megatron-LM's expert parallelism folded over the data and tensor ranks; each
  // expert whole, not tensor-split), its tokens dispatched to them and combined back by
  // all-to-alls (IR kind ALL_TO_ALL); an expert's gradients reduced over the D x T / E devices
  // that hold it.
  int expert_parallel = 1;
  // pipeline.a2a_overlap {enabled, sm_share}: an overlapped F&B pair (DualPipe's) runs its
  // all-to-alls beside its computation, which gives sm_share of the device's compute units to
  // them while they run (DeepSeek-V3: 20 of the H800's 132 SMs).
  bool a2a_overlap = true;
  double a2a_sm_share = 20.0 / 132.0;
  // pipeline.moe_dispatcher: alltoall (Megatron-LM's: every routed copy to its expert's device)
  // or deepep (one copy per node over the NIC, forwarded over NVLink; sim::AllToAllRouting).
  bool deepep = false;
  // How the job's ranks x D x T devices are numbered, innermost axis first (Megatron's order:
  // a tensor group on neighbouring devices, then the replicas, then the pipeline's stages).
  std::vector<Axis> placement = {Axis::kTensor, Axis::kData, Axis::kPipeline};
  // Pipeline ranks that time-slice one device (pipeline.ranks_per_device): ranks k*j .. k*j+k-1
  // of a replica run on the device of pipeline position j.
  int ranks_per_device = 1;

  // The devices that hold a stage's same weights and reduce its gradients: D x C.
  int replicas() const { return data_parallel * context_parallel; }
  // ranks x data_parallel x context_parallel x tensor_parallel: the job's processes.
  int64_t world() const { return int64_t{ranks} * replicas() * tensor_parallel; }
  // The pipeline's devices per replica and tensor rank: ranks / ranks_per_device, rounded up.
  int pipeline_devices() const { return (ranks + ranks_per_device - 1) / ranks_per_device; }
  // The devices the job occupies: pipeline_devices() x data_parallel x context_parallel x
  // tensor_parallel.
  int64_t devices() const { return int64_t{pipeline_devices()} * replicas() * tensor_parallel; }
  // The topology's device that runs pipeline rank `rank` of replica `replica` (of the D x C:
  // replica d x C + c is context rank c of data-parallel replica d), tensor rank `tensor` (each
  // from 0), under `placement`.
  int DeviceOf(int rank, int replica = 0, int tensor = 0) const;
  // The device of each pipeline rank of replica 0, tensor rank 0 (what the simulator runs);
  // empty for a job that is the pipeline alone (rank r on device r).
  std::vector<int> RankDevices() const;
  // For each pipeline rank, the devices of its D x C replicas (tensor rank 0), replica 0 first:
  // the ring its REDUCE_GRADs run over. Empty when D x C = 1.
  std::vector<std::vector<int>> ReplicaDevices() const;
  // For each pipeline rank, its expert group (replica 0, tensor rank 0's): the first E of the
  // D x C x T devices that hold it, tensor ranks innermost (Megatron-LM's folding of expert over
  // data, context and tensor parallelism). Empty when E = 1.
  std::vector<std::vector<int>> ExpertDevices() const;
  // Pipeline rank `rank`'s context group (replica 0's, tensor rank 0's): the C devices that split
  // its sequences, context rank 0 first; ContextDevices: every rank's, empty when C = 1.
  std::vector<int> ContextGroup(int rank) const;
  std::vector<std::vector<int>> ContextDevices() const;
};

}  // namespace stagecraft::sim
