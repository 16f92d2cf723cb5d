// Shared order of the handcrafted Zero Bubble schedules (private to schedules/src).
#pragma once

#include <vector>

#include "stagecraft/schedules/ir.h"

namespace stagecraft::schedules::detail {

// Per rank and step: `warmup[r]` forwards; then `deferred[r]` rounds of (F, I) whose W's are
// held back; then (F, I, W) while forwards remain; then (I, W); then the held-back W's.
// Stage 0 never holds a W back, so it runs full B's (as the authors' implementation does).
std::vector<std::vector<Op>> ZeroBubbleOrder(const GeneratorParams& p, const std::vector<int>& warmup,
                                             const std::vector<int>& deferred);

}  // namespace stagecraft::schedules::detail
