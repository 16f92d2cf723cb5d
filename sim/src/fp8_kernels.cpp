// training.fp8's kernels (gpt_kernels.h GptKernelShape::fp8): which of a block's GEMMs run in FP8,
// the casts before them, and the weights' cast once a step.
#include <string_view>
#include <utility>
#include <vector>

#include "kernel_lister.h"

namespace stagecraft::sim {
namespace detail {
namespace {

// A kernel's name without the prefix a recomputed one has (GptRecomputeKernels').
std::string_view AsComputed(std::string_view name) {
  constexpr std::string_view kRecompute = "recompute.";
  if (name.starts_with(kRecompute)) name.remove_prefix(kRecompute.size());
  return name;
}

// training.fp8 (GptKernelShape::fp8): which GEMMs Transformer Engine's FP8 recipes run in FP8, a
// linear layer's (its .dX and .dW too, recomputed or not); attention's scores and context, the
// fused kernel, the router and the LM head stay 16-bit.
bool RunsInFp8(std::string_view name) {
  name = AsComputed(name);
  for (const std::string_view kept : {"scores", "context", "flash_attention", "router", "head"}) {
    if (name.starts_with(kept)) return false;
  }
  return true;
}

// training.fp8_dispatch: the experts' GEMMs whose FP8 operand crossed the all-to-all, cast before
// it on the device's tokens: the up-projection's input in F (recomputed too) and the combine's
// gradient, the down-projection's in I.
bool CastBeforeDispatch(const GptKernelShape& g, std::string_view name) {
  if (!g.fp8_dispatch) return false;
  name = AsComputed(name);
  return name == "expert.fc" || name == "expert.fc2.dX";
}

}  // namespace

void ApplyFp8(const GptKernelShape& g, std::vector<Kernel>* kernels) {
  if (!g.fp8) return;
  const double tokens = static_cast<double>(DimsOf(g).lnrows);
  std::vector<Kernel> out;
  out.reserve(kernels->size() * 2);
  for (Kernel& k : *kernels) {
    const bool gemm = k.kind == KernelClass::kGemm || k.kind == KernelClass::kBatchedGemm;
    if (gemm && RunsInFp8(k.name)) {
      const double batch = static_cast<double>(k.batch), m = static_cast<double>(k.m), n = static_cast<double>(k.n);
      const double depth = static_cast<double>(k.k), d = static_cast<double>(g.dtype_bytes);
      k.fp8 = true;
      k.fp8_blockwise = g.fp8_blockwise;
      k.bytes -= (m * depth + depth * n) * batch * (d - 1);
      if (k.pass != KernelPass::kW) {
        Kernel cast;
        cast.name = k.name + ".cast";
        cast.pass = k.pass;
        cast.kind = KernelClass::kMemory;
        const double rows = CastBeforeDispatch(g, k.name) ? tokens : m * batch;
        cast.flops = rows * depth * 2;  // its absolute maximum and the scaling
        cast.bytes = rows * depth * (d * (g.fp8_amax_pass ? 2 : 1) + 2);
        out.push_back(std::move(cast));
      }
    }
    out.push_back(std::move(k));
  }
  *kernels = std::move(out);
}

}  // namespace detail

std::vector<Kernel> Fp8WeightCastKernels(double params, int dtype_bytes, bool amax_pass) {
  std::vector<Kernel> out;
  const GptKernelShape unused;
  const detail::Lister s{unused, KernelPass::kStep, &out};
  s.Memory("fp8_weight_cast", params, dtype_bytes * (amax_pass ? 2.0 : 1.0) + 2.0, 2);
  return out;
}

}  // namespace stagecraft::sim
