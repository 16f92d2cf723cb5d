// PipeDream-2BW (Narayanan et al., "Memory-Efficient Pipeline-Parallel DNN Training",
// ICML 2021 §3.1): 1F1B with no flush; gradients accumulate over the m microbatches of a
// step and each stage steps once per step, with a one-step delay: step t reads version
// max(t-1, 0), so at most 2 versions are alive. Versions: weights.h.
#include "stagecraft/schedules/generators.h"

#include <fmt/format.h>

namespace stagecraft::schedules {

std::vector<std::vector<Op>> EmitTwoBW(const GeneratorParams& p) {
  return OneFOneBOrder(p.ranks, p.microbatches * p.steps, p.microbatches, 0);
}

// Step t+2 reads the version made after step t. On rank r the first forward of step t+2 comes
// after (t+2)m - (p-1-r) backwards, so every rank has finished step t there iff m >= p-1.
std::string CheckTwoBW(const GeneratorParams& p) {
  if (p.steps >= 3 && p.microbatches < p.ranks - 1) {
    return fmt::format("2bw with {} steps needs microbatches >= ranks - 1 = {} so that step t+2 finds "
                       "the version of step t (PipeDream-2BW §3.1)", p.steps, p.ranks - 1);
  }
  return {};
}

}  // namespace stagecraft::schedules
