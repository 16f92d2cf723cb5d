// What validate.cpp shares with the scenario's loader. Internal to scenario/src.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "stagecraft/schedules/generators.h"
#include "stagecraft/scenario/validate.h"

namespace stagecraft::sim::detail {

// The problems found so far.
struct Problems {
  std::vector<ScenarioProblem> list;
  void Add(std::string_view key, std::string message) { list.push_back({std::string(key), std::move(message)}); }
  size_t size() const { return list.size(); }
};

// "unknown schedule 'NAME' (known: ..., or a .csv schedule file)"; `alone`: the only one named
// (where `all` would also do).
std::string UnknownSchedule(std::string_view name, bool alone);

// pipeline.offload against the rest of the scenario (validate_offload.cpp): a host to copy to, the
// optimizer on the host not with spilled weights, and a host DRAM bandwidth for its step unless
// the devices are CPUs (`devices_counted`: the topology's devices are known).
void CheckOffload(const Scenario& s, bool devices_counted, Problems* out);

// model.transformer and pipeline.expert_parallel (validate_transformer.cpp): heads dividing hidden
// (unless head_dim is stated) and kv_heads dividing heads, MLA without kv_heads or biases; E only with experts, E dividing the
// experts and the D x C x T devices of a stage, sequence parallelism with T > 1, the shared experts'
// width split evenly over T.
void CheckAttention(const Scenario& s, Problems* out);
void CheckExperts(const Scenario& s, Problems* out);
void CheckFp8(const Scenario& s, Problems* out);
// pipeline.context_parallel: flash attention over a sequence of 2C equal chunks.
void CheckContext(const Scenario& s, Problems* out);
// pipeline.recompute_modules: with selective recompute, each module one the model has.
void CheckRecomputeModules(const Scenario& s, Problems* out);
// CheckAttention, CheckFp8, CheckContext, CheckRecomputeModules and training.grad_dtype.
void CheckTransformer(const Scenario& s, Problems* out);

// The training block against the model (validate_training.cpp): a decay that ends below its
// start, and a target loss only for a network that has a loss.
void CheckTraining(const Scenario& s, Problems* out);

}  // namespace stagecraft::sim::detail
