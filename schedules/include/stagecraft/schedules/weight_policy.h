// Weight policies as data (DESIGN.md §2, §10): one row per policy states how many updates a
// stage makes per step, which version an op reads, and whether versions outlive the STEP that
// replaces them. AssignWeights, validation, the size estimate, the simulator's bounds and cost
// regime, and the planner read these rows instead of restating the rules.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "stagecraft/schedules/ir.h"

namespace stagecraft::schedules {

// Which weight version an F, B, I or W reads.
enum class VersionRule : uint8_t {
  kByStep,   // every microbatch of step t reads version max(t - version_lag, 0)
  kStashed,  // F reads the stage's newest version; its B, I and W read the version that F read
  kNewest,   // every op reads the stage's newest version where it runs (no stash: one version)
};

struct WeightPolicyInfo {
  WeightPolicy policy;
  std::string_view name;        // as schedules JSON and the grid print it
  bool update_per_microbatch;   // a STEP after each microbatch's last backward (else one per step)
  VersionRule reads;
  int version_lag;              // kByStep: how many updates behind step t reads
  bool stashes_versions;        // a version lives on after the STEP that replaces it (its readers)
  // The backward may read newer weights than its forward did, and PipeMare's discrepancy
  // correction (training.pipemare.correction) can extrapolate them back: one weight-sized
  // velocity buffer per stage, kept beside the weights (exec/weight_store.h, sim/memory_model.h).
  bool correctable;
  std::string_view source;      // the paper
};

inline constexpr std::array<WeightPolicyInfo, 4> kWeightPolicies = {{
    // Gradients of the whole step accumulate; one STEP per stage per step, in place.
    {WeightPolicy::kFlush, "flush", false, VersionRule::kByStep, 0, false, false,
     "GPipe (Huang et al., NeurIPS'19), PipeDream-Flush (Narayanan et al., ICML'21)"},
    // A STEP after every backward; B reads the version its F read, so n - s versions of stage s live.
    {WeightPolicy::kStash, "stash", true, VersionRule::kStashed, 0, true, false,
     "PipeDream (Harlap et al., SOSP'19)"},
    // Step t reads version t - 1 while the step's STEP makes t + 1: at most two versions live.
    {WeightPolicy::kTwoBW, "2bw", false, VersionRule::kByStep, 1, true, false,
     "PipeDream-2BW (Narayanan et al., ICML'21 §3.1)"},
    // A STEP after every backward and no stash: F and B both read the newest version, so the
    // backward of stage s of p runs on weights p - 1 - s updates newer than its forward's.
    {WeightPolicy::kNoStash, "nostash", true, VersionRule::kNewest, 0, false, true,
     "PipeMare (Yang et al., MLSys'21)"},
}};

constexpr const WeightPolicyInfo& PolicyInfo(WeightPolicy policy) {
  return kWeightPolicies[static_cast<size_t>(policy)];
}

constexpr bool PoliciesInOrder() {
  for (size_t i = 0; i < kWeightPolicies.size(); ++i) {
    if (static_cast<size_t>(kWeightPolicies[i].policy) != i) return false;
  }
  return true;
}
static_assert(PoliciesInOrder(), "kWeightPolicies has one row per WeightPolicy, in enum order");

// The updates (STEPs) one stage makes per step of `microbatches`.
constexpr int64_t UpdatesPerStep(WeightPolicy policy, int64_t microbatches) {
  return PolicyInfo(policy).update_per_microbatch ? microbatches : 1;
}

// The update a unit (step, microbatch) feeds: one per microbatch or one per step.
constexpr int64_t UpdateOf(WeightPolicy policy, int64_t microbatches, int64_t step, int64_t microbatch) {
  return PolicyInfo(policy).update_per_microbatch ? step * microbatches + microbatch : step;
}

// The version every op of `step` reads under a kByStep policy.
constexpr int VersionOfStep(WeightPolicy policy, int step) {
  const int v = step - PolicyInfo(policy).version_lag;
  return v > 0 ? v : 0;
}

// Whether `policy` takes PipeDream's vertical sync (every stage reads the version stage 0 read):
// the policies whose backward reads the version its forward read.
constexpr bool TakesVerticalSync(WeightPolicy policy) { return PolicyInfo(policy).reads == VersionRule::kStashed; }

// The policy trains as a sequential run would (every microbatch of step t reads version t, one
// update per step): only the op order differs between its schedules.
constexpr bool TrainsAsSequential(WeightPolicy policy) {
  const WeightPolicyInfo& p = PolicyInfo(policy);
  return !p.update_per_microbatch && p.reads == VersionRule::kByStep && p.version_lag == 0;
}

}  // namespace stagecraft::schedules
