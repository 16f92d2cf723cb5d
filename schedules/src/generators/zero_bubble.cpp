// The handcrafted Zero Bubble order (Qi et al., "Zero Bubble Pipeline Parallelism",
// ICLR 2024, §3.1 and Fig. 3), following the authors' ZB-H1 runtime: the backward is split
// into I (input gradients, on the critical path) and W (weight gradients, deferrable).
#include "zero_bubble.h"

#include <algorithm>

#include "emit_util.h"

namespace stagecraft::schedules::detail {

std::vector<std::vector<Op>> ZeroBubbleOrder(const GeneratorParams& p, const std::vector<int>& warmup,
                                             const std::vector<int>& deferred) {
  const int m = p.microbatches;
  std::vector<std::vector<Op>> ops(p.ranks);
  for (int rank = 0; rank < p.ranks; ++rank) {
    auto& out = ops[rank];
    const bool full_backward = rank == 0;
    for (int step = 0; step < p.steps; ++step) {
      int f = 0, i = 0, w = 0;
      auto forward = [&] { out.push_back(Compute(OpKind::kF, rank, f++, step)); };
      auto input = [&] {
        if (full_backward) {
          out.push_back(Compute(OpKind::kB, rank, i++, step));
          ++w;
        } else {
          out.push_back(Compute(OpKind::kI, rank, i++, step));
        }
      };
      auto weight = [&] {
        if (!full_backward && w < i) out.push_back(Compute(OpKind::kW, rank, w++, step));
      };
      for (int k = 0; k < std::min(warmup[rank], m); ++k) forward();
      for (int k = 0; k < deferred[rank] && f < m; ++k) {
        forward();
        input();
      }
      while (f < m) {
        forward();
        input();
        weight();
      }
      while (i < m) {
        input();
        weight();
      }
      while (w < m) weight();
    }
  }
  return ops;
}

}  // namespace stagecraft::schedules::detail
