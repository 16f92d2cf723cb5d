// ZB-H1 (Qi et al., ICLR 2024, Fig. 3 top): 1F1B's warm-up of p-1-r forwards and its peak of
// p-r stashed activations on rank r; rank r defers r weight-gradient passes (W) so they fill
// the drain. Bubble (p-1)(T_F + T_B - T_W) instead of 1F1B's (p-1)(T_F + T_B + T_W).
#include "stagecraft/schedules/generators.h"
#include "zero_bubble.h"

namespace stagecraft::schedules {

std::vector<std::vector<Op>> EmitZbH1(const GeneratorParams& p) {
  std::vector<int> warmup(p.ranks), deferred(p.ranks);
  for (int r = 0; r < p.ranks; ++r) {
    warmup[r] = p.ranks - 1 - r;
    deferred[r] = r;
  }
  return detail::ZeroBubbleOrder(p, warmup, deferred);
}

}  // namespace stagecraft::schedules
