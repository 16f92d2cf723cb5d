// The roofline cost model (DESIGN.md §9; docs/cost-model.md): a kernel of gpt_kernels.h takes
// the larger of its compute time and its memory time, plus the device's launch overhead.
//
//   GEMM compute (Wave and tile quantisation; NVIDIA's "Matrix Multiplication Background"
//   guide): for each tile tm x tn of the device's GEMM model, tiles = ⌈m/tm⌉·⌈n/tn⌉·batch,
//   waves = ⌈tiles / sms⌉, and one wave of tiles takes 2·tm·tn·(k + k_overhead) FLOPs per SM
//   at peak·max_efficiency/sms (× batched_efficiency for batched GEMMs); the fastest tile is
//   taken. So a GEMM that fills whole waves of whole tiles with a long k runs at max_efficiency,
//   a ragged last wave, a partial tile (small n) or a short k lose their share.
//   memory: bytes / (memory_bandwidth × memory_efficiency).
//   collectives: the tensor group's ring over its link (collectives.h), not overlapped.
#pragma once

#include <vector>

#include "stagecraft/sim/cost_table.h"
#include "stagecraft/sim/gpt_kernels.h"
#include "stagecraft/scenario/scenario.h"
#include "stagecraft/scenario/topology_spec.h"

namespace stagecraft::sim {

struct KernelTime {
  double compute_ns = 0;  // FLOPs at the device's rate for the kernel's class and shape
  double memory_ns = 0;   // bytes at the device's streaming bandwidth
  double link_ns = 0;     // a collective's time on its links
  double launch_ns = 0;
  double ns() const;      // max(compute, memory) + link + launch
  bool memory_bound() const { return memory_ns > compute_ns; }
};

// A GEMM's compute time on `device` at its peak `peak_flops` (ns); `blockwise_fp8`: a block-scaled
// FP8 GEMM, with the GEMM model's constants for them (GemmModel::MaxEfficiency, KOverhead).
double GemmComputeNs(const DeviceSpec& device, double peak_flops, int64_t m, int64_t n, int64_t k, int64_t batch,
                     bool batched, bool blockwise_fp8 = false);

// The time of `kernel` on `device` (peak_flops at the run's dtype); a collective over a tensor
// group of `group` devices on `link_bytes_per_s` / `link_latency_ns` per ring step.
KernelTime TimeKernel(const Kernel& kernel, const DeviceSpec& device, int group, double link_bytes_per_s,
                      int64_t link_latency_ns);

struct TimedKernel {
  Kernel kernel;
  KernelTime time;
};

// The kernel shape of a scenario's transformer (its microbatch, tensor group and precision).
GptKernelShape KernelShapeOf(const Scenario& sc);
// What pipeline.recompute repeats inside a layer's I (GptRecomputeKernels): the whole forward
// (full), the modules a selective one names (PipelineSpec::SelectiveModules), nothing.
std::vector<Kernel> RecomputeKernels(const PipelineSpec& p, const GptKernelShape& shape, bool moe_layer);
// `kernels` timed on `device`, collectives over pipeline rank `rank`'s tensor group, the context
// ring over its context group with only what its steps outlast of the attention beside them
// (max(0, ring - attention x (C - 1) / C): C - 1 steps, each beside 1 / C of the kernel's work).
std::vector<TimedKernel> TimeKernels(const Scenario& sc, int rank, const DeviceSpec& device,
                                     const std::vector<Kernel>& kernels);
// The device that pipeline rank 0 runs on (the first of RankGroups'): the one the roofline
// explanation and fit describe, and the one the layers are weighed on.
const DeviceSpec& FirstRankDevice(const Scenario& sc);
// What a backward run as one op (B = I + W) saves when its collectives run beside the weight
// GEMMs they precede (pipeline.tensor_parallel_overlap): over the collectives with a `beside`,
// the smaller of its time and that GEMM's (the two streams end with the later of them; the context
// ring's `beside` is TimeKernels'). Split
// I and W ops (Zero Bubble's) keep their sums: the W runs later, apart from the collective.
double TensorParallelOverlapNs(const std::vector<TimedKernel>& kernels);
// What the optimizer's update reads and writes per parameter (training.optimizer, else adam):
// the main gradient, the fp32 weights (master copy) and the state read and written, the
// 16-bit weights written.
double UpdateBytesPerParam(const Scenario& sc);
// What the STEP of a stage costing `cost` updates on one device: the weights it holds, or with
// pipeline.zero its share of the optimizer state (the routed experts' over their holders).
double UpdatedParams(const Scenario& sc, const StageCost& cost);

// The device's GEMM and memory efficiencies that best explain a measured transformer block
// (a profile's median block: F, I and W in ns): the pair (gemm.max_efficiency,
// memory_efficiency) that minimizes the sum over the three passes of log(predicted /
// measured)², searched on a grid of 0.01 steps from 0.01 to 2 (above 1: the device's stated
// peak or bandwidth is below what the profile shows). The other constants stay the device's.
struct RooflineFit {
  double gemm_efficiency = 0;
  double memory_efficiency = 0;
  double predicted_ns[3] = {0, 0, 0};  // F, I, W of a block with the device's constants
  double fitted_ns[3] = {0, 0, 0};     // and with the fitted ones
};
// On FirstRankDevice.
RooflineFit FitRoofline(const Scenario& sc, const double measured_ns[3]);

}  // namespace stagecraft::sim
