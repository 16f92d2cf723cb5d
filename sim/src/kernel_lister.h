// The kernel lists' shared parts (gpt_kernels.cpp, mla_kernels.cpp, fp8_kernels.cpp): a lister of
// one pass's kernels and one device's dimensions of a block.
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "stagecraft/sim/gpt_kernels.h"

namespace stagecraft::sim::detail {

// Lists a pass's kernels into `out`, each named and shaped (gpt_kernels.h's Kernel).
struct Lister {
  const GptKernelShape& g;
  KernelPass pass;
  std::vector<Kernel>* out;

  double d() const { return g.dtype_bytes; }
  void Gemm(std::string name, int64_t m, int64_t n, int64_t k, int64_t batch = 1) const {
    Kernel kernel;
    kernel.name = std::move(name);
    kernel.pass = pass;
    kernel.kind = batch > 1 ? KernelClass::kBatchedGemm : KernelClass::kGemm;
    kernel.m = m, kernel.n = n, kernel.k = k, kernel.batch = batch;
    kernel.flops = 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k) * batch;
    kernel.bytes = (static_cast<double>(m) * k + static_cast<double>(k) * n + static_cast<double>(m) * n) * batch * d();
    out->push_back(kernel);
  }
  // A memory-bound kernel over `elements` elements that moves `bytes_per_element` bytes of
  // each and does `flops_per_element` arithmetic on it.
  void Memory(std::string name, double elements, double bytes_per_element, double flops_per_element = 1) const {
    Kernel kernel;
    kernel.name = std::move(name);
    kernel.pass = pass;
    kernel.kind = KernelClass::kMemory;
    kernel.flops = elements * flops_per_element;
    kernel.bytes = elements * bytes_per_element;
    out->push_back(kernel);
  }
  void Collective(std::string name, CollectiveKind kind, double bytes) const {
    if (g.tensor_parallel <= 1) return;
    Kernel kernel;
    kernel.name = std::move(name);
    kernel.pass = pass;
    kernel.kind = KernelClass::kCollective;
    kernel.collective = kind;
    kernel.bytes = bytes;
    out->push_back(kernel);
  }
  // Into a tensor-parallel region: nothing (Megatron's f), or with sequence parallelism the
  // all-gather of the sequence shards.
  void Enter(const std::string& where, double activation_bytes) const {
    if (g.sequence_parallel) Collective(where + ".all_gather", CollectiveKind::kAllGather, activation_bytes);
  }
  // Out of one: the all-reduce of the partial sums (Megatron's g), or the reduce-scatter; in the
  // backward of a column-parallel layer, what may run beside its weight GEMM `beside`.
  void Leave(const std::string& where, double activation_bytes, const std::string& beside = "") const {
    const size_t before = out->size();
    if (g.sequence_parallel) {
      Collective(where + ".reduce_scatter", CollectiveKind::kReduceScatter, activation_bytes);
    } else {
      Collective(where + ".all_reduce", CollectiveKind::kAllReduce, activation_bytes);
    }
    if (out->size() > before) out->back().beside = beside;
  }
};

// The up-projection's columns of a feed-forward of width `f`: f, or 2f with SwiGLU's gate.
inline int64_t UpWidth(const GptKernelShape& g, int64_t f) { return g.swiglu ? 2 * f : f; }

// One device's dimensions of a block: rows b·s, the heads a/T (ap), a head's width (hd; with MLA
// the queries' and keys' qkd = hd + rope, the values' vd), the queries' width qp = ap·qkd and the
// attention's output hp = ap·vd (h / T by default), the LayerNorms' rows (s/T sequence-parallel).
struct Dims {
  int64_t rows, h, hp, ap, hd, s, b, lnrows;
  int64_t qkd, vd, qp;
  int64_t qkvp;   // one device's Q, K and V columns, (h + 2·kv·h/a)/T
  int64_t fp;     // one device's feed-forward width, f/T
  double scores;  // elements of one device's attention scores, b·(a/T)·s²
};

inline Dims DimsOf(const GptKernelShape& g) {
  const int64_t t = g.tensor_parallel;
  Dims x{};
  x.b = g.microbatch, x.s = g.seq, x.h = g.hidden;
  x.rows = g.microbatch * g.seq;
  x.hd = g.head_dim > 0 ? g.head_dim : g.hidden / g.heads;
  x.ap = g.heads / t;
  x.qkd = x.hd + (g.mla ? g.rope_head_dim : 0);
  x.vd = g.mla && g.v_head_dim > 0 ? g.v_head_dim : x.hd;
  x.qp = x.ap * x.qkd;
  x.hp = g.heads * x.vd / t;
  x.lnrows = g.sequence_parallel ? x.rows / t : x.rows;
  x.scores = static_cast<double>(x.b) * x.ap * x.s * x.s;
  const int64_t kv = g.kv_heads > 0 ? g.kv_heads : g.heads;
  x.qkvp = (g.heads * x.hd + 2 * kv * x.hd) / t;
  x.fp = (g.ffn > 0 ? g.ffn : 4 * g.hidden) / t;
  return x;
}

// Multi-head latent attention's projections (GptKernelShape::mla; mla_kernels.cpp): F from the
// LayerNorm's output to the heads' queries, keys and values (with its own collectives into the
// tensor-parallel region), I back to the LayerNorm's output gradient, W their weights' gradients
// through `weight(name, out_features, in_features, rows)`.
void MlaForward(const Lister& l, const Dims& x);
void MlaInputGrad(const Lister& l, const Dims& x);
using WeightGrad =
    std::function<void(const std::string& name, int64_t out_features, int64_t in_features, double rows)>;
void MlaWeightGrads(const Lister& w, const Dims& x, const WeightGrad& weight);

// Marks `kernels`' FP8 GEMMs (operands one byte) and puts before each one of F or I the cast of
// the operand it takes in (the input, or the incoming gradient: m x k, read at the dtype, written
// in FP8 and transposed for the weight gradient, whose GEMM reads those copies and casts nothing;
// with training.fp8_dispatch the experts' over the device's tokens, not the GEMM's m rows;
// fp8_kernels.cpp).
void ApplyFp8(const GptKernelShape& g, std::vector<Kernel>* kernels);

}  // namespace stagecraft::sim::detail
