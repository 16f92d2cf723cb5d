// The plan's option parsing and the best configuration as a scenario (plan.h).
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "plan_space.h"
#include "stagecraft/base/check.h"
#include "stagecraft/base/error.h"
#include "stagecraft/base/format.h"
#include "stagecraft/harness/plan.h"
#include "stagecraft/scenario/limits.h"
#include "stagecraft/scenario/units.h"
#include "stagecraft/sim/scenario_checks.h"

namespace stagecraft::harness {

namespace {

template <class E, size_t N>
std::vector<E> ParseNames(const std::vector<std::string>& texts, const sim::EnumName<E> (&table)[N],
                          std::string_view what) {
  std::vector<E> out;
  for (const std::string& text : texts) {
    std::string known;
    bool found = false;
    for (const auto& entry : table) {
      known += (known.empty() ? "" : ", ") + std::string(entry.name);
      if (entry.name == text) {
        out.push_back(entry.value);
        found = true;
      }
    }
    if (!found) throw InputError(fmt::format("{}: '{}' is not one of {}", what, text, known));
  }
  return out;
}

}  // namespace

std::vector<sim::Recompute> ParseRecomputeNames(const std::vector<std::string>& texts, std::string_view what) {
  return ParseNames(texts, sim::kRecomputeNames, what);
}

std::vector<sim::Partition> ParsePartitionNames(const std::vector<std::string>& texts, std::string_view what) {
  return ParseNames(texts, sim::kPartitionChoices, what);
}

int64_t ParsePlanMemoryLimit(const std::string& text, std::string_view what) {
  if (text.empty()) return 0;
  int64_t bytes = 0;
  try {
    bytes = sim::ParseBytes(text);
  } catch (const InputError& e) {
    throw InputError(fmt::format("{}: {}", what, e.what()));
  }
  if (bytes <= 0) throw InputError(fmt::format("{}: the limit must be above 0 bytes", what));
  return bytes;
}

std::string BestScenarioText(const std::string& scenario_path, std::vector<std::string> sets, const PlanResult& r,
                             const PlanOptions& options) {
  const PlanEntry* best = r.best();
  SC_CHECK(best != nullptr, "a plan without a fitting configuration has no best to write");
  for (std::string& s : ConfigOverrides(best->config, options)) sets.push_back(std::move(s));
  std::string text = fmt::format("# stagecraft plan's best for {} devices and a global batch of {}: {}\n# ({:.3f} ms "
                                 "per step, {:.2f} samples/s, {} peak per device)\n",
                                 r.gpus, r.global_batch, DescribeConfig(best->config), best->metrics.step_time_ms,
                                 best->metrics.throughput_samples_per_s, FormatBytes(best->peak_bytes));
  text += sim::ScenarioText(scenario_path, sets);
  // What is written is what was planned: it loads, with the winner's pipeline.
  const sim::Scenario written = sim::LoadScenarioFromText(text, scenario_path);
  SC_CHECK(written.pipeline.ranks == best->config.ranks && written.pipeline.microbatches == best->config.microbatches,
           "the written scenario has the winner's pipeline");
  return text;
}

}  // namespace stagecraft::harness
