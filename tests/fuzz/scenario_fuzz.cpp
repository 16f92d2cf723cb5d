// Fuzz harness: a scenario file with its --set overrides, loaded as `stagecraft simulate` loads
// it (sim::LoadScenarioFromText), then the generator parameters of each schedule it names
// checked as the schedule selection does. Input: the YAML text; each line "#set key=value" (a
// YAML comment) is also passed as an override. The file sits in scenarios/, so the shipped
// scenarios' relative topology files resolve.
#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "fuzz_input.h"
#include "stagecraft/base/error.h"
#include "stagecraft/schedules/generators.h"
#include "stagecraft/sim/scenario_checks.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace stagecraft;
  const std::string_view text = fuzz::AsText(data, size);
  try {
    const sim::Scenario s = sim::LoadScenarioFromText(text, STAGECRAFT_SOURCE_DIR "/scenarios/fuzz-input.yaml",
                                                      fuzz::MarkedLines(text, "#set "));
    const bool all = s.pipeline.schedules.size() == 1 && s.pipeline.schedules.front() == "all";
    for (const schedules::GeneratorInfo& info : schedules::Generators()) {
      if (all || std::find(s.pipeline.schedules.begin(), s.pipeline.schedules.end(), info.name) !=
                     s.pipeline.schedules.end()) {
        schedules::CheckParams(info, sim::GeneratorParamsFor(s.pipeline, info));
      }
    }
  } catch (const InputError&) {
    // Bad input, reported as it should be; anything else escapes to the fuzzer.
  }
  return 0;
}
