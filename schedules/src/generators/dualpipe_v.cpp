// DualPipe-V: DeepSeek's DualPipe (DeepSeek-AI, "DeepSeek-V3 Technical Report", arXiv
// 2412.19437, 2024, §3.2.1 and Table 2) in its "cut-in-half" V variant from the DualPipe
// repository (dualpipe/dualpipev.py), in the order PyTorch's torch.distributed.pipelining
// ScheduleDualPipeV writes it. Rank r holds chunk 0 = stage r (down the V) and chunk 1 =
// stage 2p − 1 − r (back up), and needs m >= 2p microbatches. With F0/F1 the forwards of chunk
// 0/1 and B a full backward, "(F;B)" an overlapped pair (Op::overlapped):
//   1. 2(p − r − 1) × F0
//   2. r + 1 × (F0, F1)
//   3. p − r − 1 × (I1, the oldest pending W, F1)               zero-bubble warm-up
//   4. m − 2p + r + 1 × ((F0;B1), (F1;B0))                      the overlapped steady state;
//      the last rank runs its first F0, B1 apart
//   5. p − r − 1 × (B1, (F1;B0))
//   6. r + 1 × (B1, B0), switching to I (W deferred) half way: before B1 on odd ranks,
//      before B0 on even ones
//   7. p − r − 1 × (the oldest pending W, I0)
//   8. r + 1 × the oldest pending W
// Each chunk's forward and backward counters run independently; an I queues its W. A rank then
// holds at most 2p + 1 chunk activations ("PP + 1" in the report's Table 2, PP = 2p stages):
// one more than 1F1B's p stages, held while an overlapped pair's forward runs.
#include "emit_util.h"
#include "stagecraft/schedules/generators.h"

#include <deque>
#include <utility>

#include <fmt/format.h>

namespace stagecraft::schedules {

std::string CheckDualPipeV(const GeneratorParams& p) {
  if (p.chunks != 2) {
    return fmt::format("dualpipe-v runs two stages per rank in a V; chunks must be 2 (got {})", p.chunks);
  }
  if (p.microbatches < 2 * p.ranks) {
    return fmt::format("needs at least as many microbatches as stages, 2 x ranks = {} (got {})", 2 * p.ranks,
                       p.microbatches);
  }
  return {};
}

std::vector<std::vector<Op>> EmitDualPipeV(const GeneratorParams& p) {
  const int ranks = p.ranks, m = p.microbatches;
  std::vector<std::vector<Op>> ops(ranks);
  for (int step = 0; step < p.steps; ++step) {
    for (int r = 0; r < ranks; ++r) {
      const int chunk_stage[2] = {r, 2 * ranks - 1 - r};
      int f[2] = {0, 0}, b[2] = {0, 0};     // next forward / backward (B or I) microbatch per chunk
      std::deque<std::pair<int, int>> pending_w;  // (chunk, microbatch) of each I, oldest first
      std::vector<Op>& out = ops[r];
      auto forward = [&](int chunk) { out.push_back(detail::Compute(OpKind::kF, chunk_stage[chunk], f[chunk]++, step)); };
      auto backward = [&](int chunk, OpKind kind) {
        if (kind == OpKind::kI) pending_w.emplace_back(chunk, b[chunk]);
        out.push_back(detail::Compute(kind, chunk_stage[chunk], b[chunk]++, step));
      };
      auto overlapped = [&](int forward_chunk, int backward_chunk) {
        forward(forward_chunk);
        backward(backward_chunk, OpKind::kB);
        out.back().overlapped = true;
      };
      auto oldest_w = [&] {
        if (pending_w.empty()) return;
        const auto [chunk, microbatch] = pending_w.front();
        pending_w.pop_front();
        out.push_back(detail::Compute(OpKind::kW, chunk_stage[chunk], microbatch, step));
      };

      const int down = ranks - r - 1;  // ranks below this one
      for (int i = 0; i < 2 * down; ++i) forward(0);
      for (int i = 0; i < r + 1; ++i) forward(0), forward(1);
      for (int i = 0; i < down; ++i) backward(1, OpKind::kI), oldest_w(), forward(1);
      for (int i = 0; i < m - 2 * ranks + r + 1; ++i) {
        if (i == 0 && r == ranks - 1) {
          forward(0), backward(1, OpKind::kB);
        } else {
          overlapped(0, 1);
        }
        overlapped(1, 0);
      }
      for (int i = 0; i < down; ++i) backward(1, OpKind::kB), overlapped(1, 0);
      OpKind kind = OpKind::kB;
      for (int i = 0; i < r + 1; ++i) {
        const bool half_way = i == (r + 1) / 2;
        if (half_way && r % 2 == 1) kind = OpKind::kI;
        backward(1, kind);
        if (half_way && r % 2 == 0) kind = OpKind::kI;
        backward(0, kind);
      }
      for (int i = 0; i < down; ++i) oldest_w(), backward(0, kind);
      for (int i = 0; i < r + 1; ++i) oldest_w();
    }
  }
  return ops;
}

}  // namespace stagecraft::schedules
