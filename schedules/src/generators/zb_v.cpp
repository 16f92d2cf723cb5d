// ZB-V (Qi et al., "Zero Bubble Pipeline Parallelism", ICLR 2024, §6; its V-shaped family in
// Qi et al., "Pipeline Parallelism with Controllable Memory", 2024; the Zero Bubble repository's
// V schedule), in the order PyTorch's torch.distributed.pipelining ScheduleZBVZeroBubble
// writes it. Each rank r holds two stages
// in a V: chunk 0 = stage r (going down) and chunk 1 = stage 2p − 1 − r (coming back up), so
// the last stage sits on rank 0 beside the first. With I and W apart:
//   warm-up:  2(p − r) − 1 forwards of chunk 0; then r pairs (F of chunk 1, F of chunk 0); then
//             p − r rounds of (F, I, W) of chunk 1;
//   steady:   rounds of F, I, W of chunk 0 then F, I, W of chunk 1 until every forward is out;
//   drain:    r pairs of I (chunk 0, chunk 1), p − r rounds of (I, W) of chunk 0, then the
//             deferred W's of chunk 1 and of chunk 0.
// The order is laid out for max(2p − 1, M) microbatches (the V's warm-up needs that many to
// fill); with fewer, the ops of microbatches ≥ M are dropped. A rank holds at most 2p chunk
// activations of half a stage each: 1F1B's p stage activations.
#include "emit_util.h"
#include "stagecraft/schedules/generators.h"

#include <algorithm>

#include <fmt/format.h>

namespace stagecraft::schedules {

std::string CheckZbV(const GeneratorParams& p) {
  if (p.chunks != 2) return fmt::format("zb-v runs two stages per rank in a V; chunks must be 2 (got {})", p.chunks);
  return {};
}

std::vector<std::vector<Op>> EmitZbV(const GeneratorParams& p) {
  const int ranks = p.ranks, m = p.microbatches, laid_out = std::max(2 * ranks - 1, m);
  std::vector<std::vector<Op>> ops(ranks);
  for (int step = 0; step < p.steps; ++step) {
    for (int r = 0; r < ranks; ++r) {
      const int chunk_stage[2] = {r, 2 * ranks - 1 - r};
      int f[2] = {0, 0}, b[2] = {0, 0}, w[2] = {0, 0};
      std::vector<Op>& out = ops[r];
      auto emit = [&](OpKind kind, int chunk, int microbatch) {
        if (microbatch < m) out.push_back(detail::Compute(kind, chunk_stage[chunk], microbatch, step));
      };
      auto forward = [&](int chunk) { emit(OpKind::kF, chunk, f[chunk]++); };
      auto input_then_weight = [&](int chunk) {
        emit(OpKind::kI, chunk, b[chunk]);
        emit(OpKind::kW, chunk, b[chunk]);
        ++b[chunk], ++w[chunk];
      };
      for (int i = 0; i < 2 * (ranks - r) - 1; ++i) forward(0);
      for (int i = 0; i < r; ++i) forward(1), forward(0);
      for (int i = 0; i < ranks - r; ++i) forward(1), input_then_weight(1);
      while (f[1] < f[0] || f[0] < laid_out) {
        if (f[0] < laid_out) forward(0);
        input_then_weight(0);
        forward(1), input_then_weight(1);
      }
      for (int i = 0; i < r; ++i) {
        emit(OpKind::kI, 0, b[0]++);
        emit(OpKind::kI, 1, b[1]++);
      }
      for (int i = 0; i < ranks - r; ++i) {
        emit(OpKind::kI, 0, b[0]++);
        emit(OpKind::kW, 0, w[0]++);
      }
      while (w[1] < b[1]) emit(OpKind::kW, 1, w[1]++);
      while (w[0] < b[0]) emit(OpKind::kW, 0, w[0]++);
    }
  }
  return ops;
}

}  // namespace stagecraft::schedules
