// The copies pipeline.offload puts into a job's schedules (DESIGN.md §10; docs/scenario.md,
// "Copies to host memory"), private to the harness: spilled weights, then offloaded activations,
// a fixed share or `auto`'s, which the simulator decides.
#pragma once

#include <atomic>

#include "stagecraft/schedules/ir.h"
#include "stagecraft/scenario/scenario.h"

namespace stagecraft::harness::detail {

// `s` (a built, lowered, validated schedule) with pipeline.offload's copies: every stage's
// weights and optimizer state spilled (weights: spill, or the spilled schedule, which is that),
// then the activations offloaded. `auto` simulates the scenario `costs_from`; without one it is
// refused (InputError).
schedules::Schedule WithCopies(const sim::PipelineSpec& p, schedules::Schedule s, const sim::Scenario* costs_from,
                               const std::atomic<bool>* cancel);

}  // namespace stagecraft::harness::detail
