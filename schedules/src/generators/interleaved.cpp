// Interleaved 1F1B (Megatron-LM, Narayanan et al., SC'21 §2.2.2): each rank holds `chunks`
// virtual stages (stage c*p + r on rank r). Microbatches move through the chunks in groups
// of p; rank r warms up with 2(p-1-r) + (v-1)p chunk-forwards (all of them when m == p, as
// Megatron does; PyTorch caps the warm-up there instead, an order --import reads), then
// alternates one chunk-forward and one chunk-backward, then drains. The bubble shrinks by a
// factor v: (p-1)(t_f + t_b)/v. With m not a multiple of p, PyTorch's order (below).
// interleaved-overlap is Megatron-LM's combined 1F1B (--overlap-moe-expert-parallel-comm,
// megatron/core/pipeline_parallel/schedules.py get_pp_rank_microbatches): one chunk-forward more
// in the warm-up, so that each steady-state F and the B after it are independent, and each such
// F;B an overlapped pair (Op::overlapped): one microbatch's all-to-alls run beside the other's
// compute.
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

// PyTorch's order for m not a multiple of p (torch.distributed.pipelining
// ScheduleInterleaved1F1B, "flexible" interleaving): microbatches go through the chunks in
// rounds of m / max(1, m / p) (m must divide into those rounds); rank r warms up with
// (v-1)·round + 2(p-1-r) chunk-forwards (at most all of them); the k-th chunk-forward is on
// chunk (k / round) mod v, the k-th chunk-backward after the warm-up on chunk
// v-1 - ((k - warmup) / round) mod v, each stage's microbatches in order.
void FlexibleRank(const GeneratorParams& p, bool paired, int rank, int step, std::vector<Op>* out) {
  const int v = p.chunks, m = p.microbatches, ranks = p.ranks;
  const int per_round = m / std::max(1, m / ranks);
  const int total = m * v;
  const int warmup = std::min((v - 1) * per_round + 2 * (ranks - 1 - rank) + (paired ? 1 : 0), total);
  std::vector<int> next_f(static_cast<size_t>(v), 0), next_b(static_cast<size_t>(v), 0);
  auto forward = [&](int k) {
    const int chunk = (k / per_round) % v;
    out->push_back(detail::Compute(OpKind::kF, chunk * ranks + rank, next_f[chunk]++, step));
  };
  auto backward = [&](int k) {
    const int chunk = v - 1 - ((k - warmup) / per_round) % v;
    out->push_back(detail::Compute(OpKind::kB, chunk * ranks + rank, next_b[chunk]++, step));
  };
  for (int k = 0; k < warmup; ++k) forward(k);
  for (int k = warmup; k < total; ++k) {
    forward(k), backward(k);
    out->back().overlapped = paired;
  }
  for (int k = total; k < total + warmup; ++k) backward(k);
}

// Both orders; `paired`: interleaved-overlap's (one more warm-up forward, steady-state pairs).
std::vector<std::vector<Op>> Emit(const GeneratorParams& p, bool paired) {
  const int total = p.microbatches * p.chunks;
  std::vector<std::vector<Op>> ops(p.ranks);
  if (p.microbatches % p.ranks != 0) {
    for (int rank = 0; rank < p.ranks; ++rank) {
      for (int step = 0; step < p.steps; ++step) FlexibleRank(p, paired, rank, step, &ops[rank]);
    }
    return ops;
  }
  for (int rank = 0; rank < p.ranks; ++rank) {
    int warmup = (p.ranks - rank - 1) * 2 + (p.chunks - 1) * p.ranks + (paired ? 1 : 0);
    if (p.microbatches == p.ranks) warmup = total;
    warmup = std::min(warmup, total);
    for (int step = 0; step < p.steps; ++step) {
      auto& out = ops[rank];
      for (int k = 0; k < warmup; ++k) out.push_back(VirtualOp(OpKind::kF, k, rank, p.ranks, p.chunks, step));
      for (int i = 0; i + warmup < total; ++i) {
        out.push_back(VirtualOp(OpKind::kF, warmup + i, rank, p.ranks, p.chunks, step));
        out.push_back(VirtualOp(OpKind::kB, i, rank, p.ranks, p.chunks, step));
        out.back().overlapped = paired;
      }
      for (int k = total - warmup; k < total; ++k) out.push_back(VirtualOp(OpKind::kB, k, rank, p.ranks, p.chunks, step));
    }
  }
  return ops;
}

}  // namespace

std::vector<std::vector<Op>> EmitInterleaved(const GeneratorParams& p) { return Emit(p, false); }

std::vector<std::vector<Op>> EmitInterleavedOverlap(const GeneratorParams& p) { return Emit(p, true); }

std::string CheckInterleaved(const GeneratorParams& p) {
  if (p.chunks < 2) return fmt::format("interleaved needs chunks >= 2 (got {}); with 1 chunk use 1f1b", p.chunks);
  const int rounds = std::max(1, p.microbatches / p.ranks);
  if (p.microbatches % rounds != 0) {
    return fmt::format("interleaved needs microbatches to divide into max(1, microbatches / ranks) = {} rounds (got {} "
                       "microbatches, {} ranks; PyTorch's Interleaved1F1B)", rounds, p.microbatches, p.ranks);
  }
  return {};
}

}  // namespace stagecraft::schedules
