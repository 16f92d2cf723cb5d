// ZB-H2 (Qi et al., ICLR 2024, Fig. 3 bottom): rank r warms up with 2(p-1-r) forwards (up to
// 2p-1 microbatches stashed on rank 0) so the first backward arrives with no idle time, and
// defers 2r W's into the drain. At zero communication cost no bubble is left within each
// rank's span: (p-1)(T_F + T_B - 2T_W) = 0 at T_F = T_B = T_W.
#include "stagecraft/schedules/generators.h"
#include "zero_bubble.h"

namespace stagecraft::schedules {

std::vector<std::vector<Op>> EmitZbH2(const GeneratorParams& p) {
  std::vector<int> warmup(p.ranks), deferred(p.ranks);
  for (int r = 0; r < p.ranks; ++r) {
    warmup[r] = 2 * (p.ranks - 1 - r);
    deferred[r] = 2 * r;
  }
  return detail::ZeroBubbleOrder(p, warmup, deferred);
}

}  // namespace stagecraft::schedules
