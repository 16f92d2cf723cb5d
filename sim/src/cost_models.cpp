// The cost-model table: adding a cost model is one file plus one row here (cost_models.h).
#include "stagecraft/sim/cost_models.h"

#include <fmt/format.h>

#include <algorithm>

#include "cost_model_rows.h"
#include "stagecraft/base/check.h"
#include "stagecraft/base/error.h"
#include "stagecraft/schedules/weight_policy.h"

namespace stagecraft::sim {

const std::vector<CostModel>& CostModels() {
  static const std::vector<CostModel> kTable = {
      detail::ProfileCostModel(),
      detail::ExplicitCostModel(),
      detail::RooflineCostModel(),
      detail::TransformerCostModel(),
      detail::MlpCostModel(),
  };
  return kTable;
}

const CostModel& CostModelFor(const Scenario& scenario) {
  std::string keys;
  for (const CostModel& model : CostModels()) {
    if (model.applies(scenario)) return model;
    // Two rows may share a key (roofline and transformer: model.transformer); each is named once.
    if (keys.find(model.key) == std::string::npos) keys += fmt::format("{}{}", keys.empty() ? "" : ", ", model.key);
  }
  throw InputError(fmt::format("{}{}model has none of {}", scenario.path, scenario.path.empty() ? "" : ": ", keys));
}

CostTable BuildCosts(const Scenario& scenario, const CostQuery& query) {
  const int ranks = scenario.pipeline.ranks;
  SC_CHECK(ranks >= 1 && query.shape.ranks == ranks && query.shape.chunks >= 1,
           fmt::format("a shape of {} x {} stages for {} ranks", query.shape.ranks, query.shape.chunks, ranks));
  CostTable table = CostModelFor(scenario).build(scenario, query);
  SC_CHECK(static_cast<int>(table.stages.size()) == query.shape.stages(), "one cost entry per stage");
  if (scenario.pipeline.offload.optimizer == OptimizerPlace::kHost) PlaceOptimizerOnHost(scenario, &table);
  const std::optional<PipeMareSpec>& pipemare = scenario.training.pipemare;
  table.weight_velocity = scenario.has_training && pipemare && pipemare->correction;
  table.grad_reduce_overlap = scenario.pipeline.grad_reduce_overlap;
  return table;
}

int64_t HostStepNs(const Scenario& scenario, const StageCost& c) {
  const double bw = scenario.topology.host.memory_bandwidth_bytes_per_s;
  if (bw <= 0) return c.step_ns;  // the host is the device (validate.cpp requires one or the other)
  const double bytes = 2.0 * static_cast<double>(c.weight_bytes) + static_cast<double>(c.grad_bytes) +
                       2.0 * static_cast<double>(c.optimizer_bytes);
  return static_cast<int64_t>(bytes * 1e9 / bw);
}

void PlaceOptimizerOnHost(const Scenario& scenario, CostTable* table) {
  const HostSpec& host = scenario.topology.host;
  SC_CHECK(host.bandwidth_bytes_per_s > 0, "optimizer: host with a host link (validated)");
  const auto alone = [&host](int64_t bytes) { return static_cast<int64_t>(host.CopyNs(bytes)); };
  for (StageCost& c : table->stages) c.step_ns = alone(c.grad_bytes) + HostStepNs(scenario, c) + alone(c.weight_bytes);
  table->optimizer_on_host = true;
}

CostTable BuildCosts(const Scenario& scenario, int stages) {
  const int ranks = scenario.pipeline.ranks;
  SC_CHECK(ranks >= 1 && stages >= ranks && stages % ranks == 0,
           fmt::format("{} stages is not a multiple of {} ranks", stages, ranks));
  return BuildCosts(scenario, CostQuery{schedules::Shape{ranks, stages / ranks, schedules::Placement::kLoop}});
}

CostTable BuildCosts(const Scenario& scenario, const schedules::Schedule& schedule) {
  return BuildCosts(scenario, CostQuery{schedule.shape, UpdatesEveryMicrobatch(schedule)});
}

bool UpdatesEveryMicrobatch(const schedules::Schedule& schedule) {
  return schedules::UpdatesPerStep(schedule.weights, schedule.microbatches) > 1;
}

}  // namespace stagecraft::sim
