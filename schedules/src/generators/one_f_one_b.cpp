// 1F1B with a flush per step: PipeDream-Flush (Narayanan et al., "Memory-Efficient Pipeline-
// Parallel DNN Training", ICML 2021) as used by Megatron-LM (Narayanan et al., SC'21 §2.2.1).
// Rank r warms up with min(p-1-r, m) forwards, then alternates one forward and one backward,
// then drains its remaining backwards; at most p-r microbatches are in flight on rank r.
#include "stagecraft/schedules/generators.h"
#include "emit_util.h"

#include <algorithm>

namespace stagecraft::schedules {

std::vector<std::vector<Op>> OneFOneBOrder(int ranks, int total, int m, int step_offset) {
  std::vector<std::vector<Op>> ops(ranks);
  auto compute = [&](OpKind kind, int rank, int k) {
    return detail::Compute(kind, rank, k % m, step_offset + k / m);
  };
  for (int rank = 0; rank < ranks; ++rank) {
    auto& out = ops[rank];
    out.reserve(2 * static_cast<size_t>(total));
    const int warmup = std::min(ranks - 1 - rank, total);
    for (int k = 0; k < warmup; ++k) out.push_back(compute(OpKind::kF, rank, k));
    for (int i = 0; i + warmup < total; ++i) {
      out.push_back(compute(OpKind::kF, rank, warmup + i));
      out.push_back(compute(OpKind::kB, rank, i));
    }
    for (int k = std::max(total - warmup, 0); k < total; ++k) out.push_back(compute(OpKind::kB, rank, k));
  }
  return ops;
}

std::vector<std::vector<Op>> EmitOneFOneB(const GeneratorParams& p) {
  std::vector<std::vector<Op>> ops(p.ranks);
  for (int step = 0; step < p.steps; ++step) {
    auto one_step = OneFOneBOrder(p.ranks, p.microbatches, p.microbatches, step);
    for (int rank = 0; rank < p.ranks; ++rank) detail::Append(&ops[rank], one_step[rank]);
  }
  return ops;
}

}  // namespace stagecraft::schedules
