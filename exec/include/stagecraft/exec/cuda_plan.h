// The host-side decisions of the cuda backend, kept apart from CUDA so that tests check them on
// any machine: how training.dtype maps to GEMM precision, how a row-major GEMM becomes
// cuBLAS's column-major call, which GPU a rank takes, and which transport and NCCL channels
// the ranks use (those of the routes a run sends over).
#pragma once

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "stagecraft/exec/transport.h"

namespace stagecraft::exec {

// How the GEMMs of a cuda run read their inputs (training.dtype):
//   fp32: fp32 products and sums;
//   tf32: fp32 tensors, tensor-core products of inputs rounded to tf32 (10-bit mantissa);
//   bf16, fp16: inputs rounded from the fp32 tensors to 16 bits, products summed in fp32.
// Weights, activations between ops, gradients and optimizer state stay fp32 in every mode
// (fp32 master weights); only what a GEMM reads is rounded.
enum class GemmPrecision { kFp32, kTf32, kBf16, kFp16 };

inline std::optional<GemmPrecision> GemmPrecisionFor(std::string_view dtype) {
  if (dtype == "fp32") return GemmPrecision::kFp32;
  if (dtype == "tf32") return GemmPrecision::kTf32;
  if (dtype == "bf16") return GemmPrecision::kBf16;
  if (dtype == "fp16") return GemmPrecision::kFp16;
  return std::nullopt;
}

// A row-major GEMM c[m x n] = op(a)[m x k] · op(b)[k x n] (LinearOps::gemm) as one column-major
// cuBLAS call. A row-major matrix read column-major is its transpose, so the call computes
// cᵀ = op(b)ᵀ · op(a)ᵀ: the first operand is b, the second a, and the product is n x m.
struct ColumnMajorGemm {
  bool trans_first = false;   // transpose b's column-major view (b was given transposed)
  bool trans_second = false;  // transpose a's column-major view
  int m = 0, n = 0, k = 0;    // of the column-major product: rows n, columns m, inner k
  int ld_first = 0, ld_second = 0, ld_out = 0;
};

inline ColumnMajorGemm ToColumnMajor(bool trans_a, bool trans_b, int m, int n, int k) {
  ColumnMajorGemm g;
  g.trans_first = trans_b;
  g.trans_second = trans_a;
  g.m = n;
  g.n = m;
  g.k = k;
  g.ld_first = trans_b ? k : n;   // b is stored [n x k] when transposed, [k x n] otherwise
  g.ld_second = trans_a ? m : k;  // a is stored [k x m] when transposed, [m x k] otherwise
  g.ld_out = n;
  return g;
}

// A linear layer's GEMM with what follows it fused into cuBLASLt's epilogue
// (LayerOps::fused_linear on the cuda backend), as one column-major call:
//   forward, out[rows x out] = GELU(z), z = x[rows x in] · w[out x in]ᵀ + bias: GELU_AUX_BIAS,
//     out the product's D and z its auxiliary output (the pre-activation the backward reads);
//   weight gradient, dw[out x in] (+)= dzᵀ · x[rows x in] with the bias gradient Σ_rows dz from
//     the same call: BGRADB, the second operand (dz) reduced over the inner dimension (rows);
//   input gradient through the activation before the layer, d[rows x in] = GELU'(pre) ⊙
//     (dz[rows x out] · w[out x in]): DGELU, `pre` (the GELU's input) the auxiliary input;
//   a layer with no activation, y = x · wᵀ + bias (+ residual): BIAS, the residual as the
//     product's C with beta 1.
enum class LtEpilogue { kGeluAuxBias, kBgradB, kDGelu, kBias };
struct LtLinearPlan {
  ColumnMajorGemm g;  // first operand w (forward) or x (weight gradient), second x or dz
  LtEpilogue epilogue = LtEpilogue::kGeluAuxBias;
  int64_t aux_ld = 0;       // kGeluAuxBias, kDGelu: z's or pre's leading dimension, the output's
  int64_t bias_length = 0;  // the bias read (forward) or its gradient written (weight gradient)
};
// cuBLASLt's epilogue auxiliary output needs a leading dimension divisible by 8; every operand
// is asked for at 16-byte alignment (what the algorithms chosen may assume).
inline constexpr int kLtAuxLdMultiple = 8;
inline constexpr int kLtAlignmentBytes = 16;
inline bool LtAligned(std::initializer_list<const void*> pointers) {
  for (const void* p : pointers) {
    if (reinterpret_cast<uintptr_t>(p) % kLtAlignmentBytes != 0) return false;
  }
  return true;
}

// A plan of one of the layer's row-major GEMMs (LinearOps::gemm's arguments): the epilogues with
// an auxiliary matrix read or write it in the output's shape and leading dimension.
inline LtLinearPlan MakeLtPlan(LtEpilogue epilogue, bool trans_a, bool trans_b, int m, int n, int k,
                               int64_t bias_length) {
  LtLinearPlan p;
  p.g = ToColumnMajor(trans_a, trans_b, m, n, k);
  p.epilogue = epilogue;
  p.aux_ld = epilogue == LtEpilogue::kGeluAuxBias || epilogue == LtEpilogue::kDGelu ? p.g.ld_out : 0;
  p.bias_length = bias_length;
  return p;
}

// The forward's plan, or none where the epilogue cannot hold what the layer does: an
// activation other than GELU (the cuBLASLt GELU is the tanh form, kernels::Activation::kGelu),
// a residual added after the activation, an output width that is not a multiple of
// kLtAuxLdMultiple, operands not aligned, or an empty product.
inline std::optional<LtLinearPlan> PlanFusedForward(bool gelu, bool residual, int rows, int out_features,
                                                    int in_features, bool aligned) {
  if (!gelu || residual || !aligned || rows <= 0 || out_features <= 0 || in_features <= 0 ||
      out_features % kLtAuxLdMultiple != 0) {
    return std::nullopt;
  }
  return MakeLtPlan(LtEpilogue::kGeluAuxBias, false, true, rows, out_features, in_features, out_features);
}

// The input gradient's plan, or none where the activation before the layer is not GELU, its
// width (the layer's input width) is not a multiple of kLtAuxLdMultiple, operands are not
// aligned, or the product is empty.
inline std::optional<LtLinearPlan> PlanFusedInputGrad(bool gelu, int rows, int out_features, int in_features,
                                                      bool aligned) {
  if (!gelu || !aligned || rows <= 0 || out_features <= 0 || in_features <= 0 ||
      in_features % kLtAuxLdMultiple != 0) {
    return std::nullopt;
  }
  return MakeLtPlan(LtEpilogue::kDGelu, false, false, rows, in_features, out_features, 0);
}

// The plan of a layer with no activation, or none for operands not aligned or an empty product.
inline std::optional<LtLinearPlan> PlanFusedBias(int rows, int out_features, int in_features, bool aligned) {
  if (!aligned || rows <= 0 || out_features <= 0 || in_features <= 0) return std::nullopt;
  return MakeLtPlan(LtEpilogue::kBias, false, true, rows, out_features, in_features, out_features);
}

// The weight gradient's plan, or none for operands not aligned or an empty product.
inline std::optional<LtLinearPlan> PlanFusedWeightGrad(int rows, int out_features, int in_features, bool aligned) {
  if (!aligned || rows <= 0 || out_features <= 0 || in_features <= 0) return std::nullopt;
  return MakeLtPlan(LtEpilogue::kBgradB, true, false, out_features, in_features, rows, out_features);
}

// The GPU of a process: its rank among the node's processes modulo the node's GPUs, so each
// process has a GPU of its own when there are enough, and processes share them round robin
// otherwise (then the MPI transport carries their transfers, see cuda_device.h).
// With `ranks_per_device` k, local ranks k*j .. k*j+k-1 share GPU j (modulo the GPUs), as the
// simulator places neighbouring pipeline ranks (pipeline.ranks_per_device).
inline int GpuForLocalRank(int local_rank, int gpus, int ranks_per_device = 1) {
  return gpus > 0 ? (local_rank / std::max(ranks_per_device, 1)) % gpus : -1;
}

// NCCL moves the tensors when every process of the node has a GPU of its own (a GPU cannot
// appear twice in one NCCL communicator), judged by what the processes really hold, their GPUs'
// PCI bus ids: a launcher that gives each process one GPU through CUDA_VISIBLE_DEVICES makes
// every process see "1 GPU", yet no two share one. False when an id is missing (no GPU) or
// appears twice. backend.h's EveryProcessHasItsOwnGpu asks it of every node.
inline bool GpusAreDistinct(std::vector<std::string> bus_ids) {
  if (bus_ids.empty() || std::find(bus_ids.begin(), bus_ids.end(), std::string()) != bus_ids.end()) return false;
  std::sort(bus_ids.begin(), bus_ids.end());
  return std::adjacent_find(bus_ids.begin(), bus_ids.end()) == bus_ids.end();
}

// One direction of traffic between two ranks. The NCCL transport gives each its own two-rank
// communicator (sender rank 0, receiver rank 1) and its own stream on both sides, so a send
// that waits for its receiver never holds up traffic in the other direction or to another peer;
// within a channel NCCL matches sends and receives in order, which the lowering guarantees
// (schedules/lower.h, checked by Validate).
struct NcclChannel {
  int from = 0;
  int to = 0;
  bool operator==(const NcclChannel&) const = default;
};

// The channels rank `rank` takes part in among `routes` (a run's traffic: Routes in mailbox.h),
// each once, in the routes' order: every rank sees the same routes, so the two ends of a channel
// agree on it. Only what a schedule sends gets a communicator (1F1B's pipeline has no
// wrap-around channel; an interleaved one does).
inline std::vector<NcclChannel> NcclChannelsOf(const std::vector<Route>& routes, int rank) {
  std::vector<NcclChannel> channels;
  for (const Route& r : routes) {
    const NcclChannel c{r.from, r.to};
    if ((r.from == rank || r.to == rank) && r.from != r.to &&
        std::find(channels.begin(), channels.end(), c) == channels.end()) {
      channels.push_back(c);
    }
  }
  return channels;
}

// One tensor the NCCL transport moves before a run to connect `channel` at a size (NCCL
// connects what a size needs at its first transfer of it).
struct NcclProbe {
  NcclChannel channel;
  int64_t floats = 0;
  bool operator==(const NcclProbe&) const = default;
};

// The tensors rank `rank` moves to connect `routes` (Transport::Prepare): one per channel it
// takes part in and size the routes carry, leaving out those in `done` (moved by an earlier
// run) and empty sizes, each once, in the routes' order, which is the order both ends of a
// channel post them in.
inline std::vector<NcclProbe> NcclProbesOf(const std::vector<Route>& routes, int rank,
                                           const std::vector<NcclProbe>& done) {
  std::vector<NcclProbe> probes;
  for (const Route& r : routes) {
    const NcclProbe p{{r.from, r.to}, r.floats};
    if ((r.from != rank && r.to != rank) || r.from == r.to || r.floats <= 0) continue;
    if (std::find(done.begin(), done.end(), p) != done.end()) continue;
    if (std::find(probes.begin(), probes.end(), p) == probes.end()) probes.push_back(p);
  }
  return probes;
}

}  // namespace stagecraft::exec
