// Interleaved 1F1B (Megatron-LM, Narayanan et al., SC'21 §2.2.2): each rank holds `chunks`
// virtual stages (stage c*p + r on rank r). Microbatches move through the chunks in groups
// of p; rank r warms up with 2(p-1-r) + (v-1)p chunk-forwards (all of them when m == p, as
// Megatron does), then alternates one chunk-forward and one chunk-backward, then drains.
// The bubble shrinks by a factor v: (p-1)(t_f + t_b)/v.
#include "stagecraft/schedules/generators.h"
#include "emit_util.h"

#include <algorithm>

#include <fmt/format.h>

namespace stagecraft::schedules {
namespace {

// Megatron's get_model_chunk_id plus the microbatch of the k-th chunk-op of a rank.
Op VirtualOp(OpKind kind, int k, int rank, int ranks, int chunks, int step) {
  const int group_size = ranks * chunks;
  const int in_group = k % group_size;
  int chunk = in_group / ranks;
  if (kind != OpKind::kF) chunk = chunks - 1 - chunk;
  const int microbatch = (k / group_size) * ranks + in_group % ranks;
  return detail::Compute(kind, chunk * ranks + rank, microbatch, step);
}

}  // namespace

std::vector<std::vector<Op>> EmitInterleaved(const GeneratorParams& p) {
  const int total = p.microbatches * p.chunks;
  std::vector<std::vector<Op>> ops(p.ranks);
  for (int rank = 0; rank < p.ranks; ++rank) {
    int warmup = (p.ranks - rank - 1) * 2 + (p.chunks - 1) * p.ranks;
    if (p.microbatches == p.ranks) warmup = total;
    warmup = std::min(warmup, total);
    for (int step = 0; step < p.steps; ++step) {
      auto& out = ops[rank];
      for (int k = 0; k < warmup; ++k) out.push_back(VirtualOp(OpKind::kF, k, rank, p.ranks, p.chunks, step));
      for (int i = 0; i + warmup < total; ++i) {
        out.push_back(VirtualOp(OpKind::kF, warmup + i, rank, p.ranks, p.chunks, step));
        out.push_back(VirtualOp(OpKind::kB, i, rank, p.ranks, p.chunks, step));
      }
      for (int k = total - warmup; k < total; ++k) out.push_back(VirtualOp(OpKind::kB, k, rank, p.ranks, p.chunks, step));
    }
  }
  return ops;
}

std::string CheckInterleaved(const GeneratorParams& p) {
  if (p.chunks < 2) return fmt::format("interleaved needs chunks >= 2 (got {}); with 1 chunk use 1f1b", p.chunks);
  if (p.microbatches % p.ranks != 0) {
    return fmt::format("interleaved needs microbatches to be a multiple of ranks (got {} microbatches, {} ranks; "
                       "Megatron-LM §2.2.2)", p.microbatches, p.ranks);
  }
  return {};
}

}  // namespace stagecraft::schedules
