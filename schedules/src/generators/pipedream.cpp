// PipeDream (Harlap/Narayanan et al., SOSP 2019): asynchronous 1F1B with no flush. The
// steps * m microbatches stream through one continuous 1F1B order; each stage applies an
// optimizer step after every backward, and weight stashing makes each backward use the
// version its forward read, so stage s of n keeps n - s versions (§3.3). With vertical sync
// every stage uses the version stage 0 used for that microbatch. Versions: weights.h.
//
// PipeMare (Yang et al., MLSys 2021) runs the same asynchronous order without the stash: one
// version per stage, F and B reading the newest (WeightPolicy::kNoStash), so the weights a
// backward uses are p - 1 - s updates newer than its forward's in the steady state; its
// learning-rate rescheduling and discrepancy correction are the executor's (exec/optimizer.h).
#include "stagecraft/schedules/generators.h"

namespace stagecraft::schedules {

std::vector<std::vector<Op>> EmitPipeDream(const GeneratorParams& p) {
  return OneFOneBOrder(p.ranks, p.microbatches * p.steps, p.microbatches, 0);
}

std::vector<std::vector<Op>> EmitPipeMare(const GeneratorParams& p) { return EmitPipeDream(p); }

}  // namespace stagecraft::schedules
