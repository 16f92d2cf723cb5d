// Fuzz harness: `stagecraft plan`'s inputs up to its search: the scenario loaded as plan loads it
// (sim::LoadScenarioForNewLayoutFromText, with its "#set key=value" lines as --set overrides),
// the job's "#gpus N" and "#batch B" lines (default 8 and 32), the options checked, the space
// enumerated and held to a tight budget (10^4 ops per configuration, 10^5 in all), so that every
// input is decided fast. Whatever is kept must be a layout of N devices, split B exactly, and fit
// the budget; anything but an InputError escapes to the fuzzer.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "fuzz_input.h"
#include "plan_space.h"
#include "stagecraft/base/error.h"
#include "stagecraft/sim/scenario_checks.h"

namespace {

// The last "#KEY N" line's number, else `fallback` (a malformed number is the fallback too:
// the flags' own parsing is CLI11's).
int64_t Number(std::string_view text, std::string_view key, int64_t fallback) {
  const std::vector<std::string> lines = stagecraft::fuzz::MarkedLines(text, key);
  if (lines.empty()) return fallback;
  char* end = nullptr;
  const long long n = std::strtoll(lines.back().c_str(), &end, 10);
  return end != lines.back().c_str() ? n : fallback;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace stagecraft;
  const std::string_view text = fuzz::AsText(data, size);
  try {
    const sim::Scenario s = sim::LoadScenarioForNewLayoutFromText(
        text, STAGECRAFT_SOURCE_DIR "/scenarios/fuzz-input.yaml", fuzz::MarkedLines(text, "#set "));
    harness::PlanOptions o;
    const int64_t gpus = Number(text, "#gpus ", 8);
    o.gpus = gpus < INT32_MIN || gpus > INT32_MAX ? -1 : static_cast<int>(gpus);
    o.global_batch = Number(text, "#batch ", 32);
    o.threads = 1;
    o.max_ops = 10'000;
    o.max_plan_ops = 100'000;
    harness::detail::CheckInputs(s, o);
    harness::detail::Space space(s, o);
    harness::detail::FillSpace(&space);
    harness::PlanResult result;
    std::vector<harness::detail::CostKey> keys;
    std::vector<harness::detail::Candidate> kept = harness::detail::Enumerate(space, &result, &keys);
    harness::detail::KeepWithinBudget(space, &kept, &result);
    double ops = 0;
    for (const harness::detail::Candidate& c : kept) {
      const harness::PlanConfig& k = c.config;
      if (int64_t{k.ranks} * k.data_parallel * k.tensor_parallel != o.gpus ||
          int64_t{k.data_parallel} * k.microbatch_size * k.microbatches != o.global_batch || c.ops > 10'000 ||
          c.facts < 0 || static_cast<size_t>(c.facts) >= keys.size()) {
        std::abort();  // a configuration outside the job, or past --max-ops
      }
      ops += c.ops;
    }
    if (ops > 100'000) std::abort();  // past the plan's budget
  } catch (const InputError&) {
    // Bad input, reported as it should be; anything else escapes to the fuzzer.
  }
  return 0;
}
