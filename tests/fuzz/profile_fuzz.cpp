// Fuzz harness: a profile file (model.profile, written by `stagecraft profile`), read by
// sim::ProfileFromYaml and then turned into stage costs as the simulator does, for an mlp and a
// transformer scenario, both partitions and both weight-update regimes.
#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "fuzz_input.h"
#include "stagecraft/base/error.h"
#include "stagecraft/sim/profile_costs.h"
#include "stagecraft/scenario/profile_yaml.h"

using namespace stagecraft;

namespace {

// A scenario that the profile fits: its microbatch size, one rank per calibrated rank (else
// two), one layer count, with the transformer's vocabulary when `transformer`.
sim::Scenario ScenarioFor(const sim::Profile& p, bool transformer, bool balanced) {
  sim::Scenario s;
  s.name = "profile-fuzz";
  s.model.profile_path = "profile-fuzz.yaml";
  const int layers = static_cast<int>(p.layers.size());
  s.training.dtype = sim::Dtype::kBf16;
  if (transformer) s.model.transformer = sim::TransformerSpec{layers, 64, 4, 16, 1000};
  else s.model.mlp = sim::MlpSpec{layers, 64};
  s.pipeline.ranks = p.ranks.empty() ? std::min(layers, 2) : static_cast<int>(p.ranks.size());
  s.pipeline.microbatches = 4;
  s.pipeline.microbatch_size = p.microbatch_size;
  s.pipeline.partition = balanced ? sim::Partition::kBalanced : sim::Partition::kEven;
  return s;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const sim::Profile p = sim::ProfileFromYaml(fuzz::AsText(data, size), "profile-fuzz.yaml");
    for (const bool transformer : {false, true}) {
      for (const bool balanced : {false, true}) {
        const sim::Scenario s = ScenarioFor(p, transformer, balanced);
        const schedules::Shape shape{s.pipeline.ranks, 1, schedules::Placement::kLoop};
        for (const bool per_microbatch : {false, true}) {
          sim::CostsFromProfile(s, p, shape, per_microbatch, /*calibrated=*/true);
        }
      }
    }
  } catch (const InputError&) {
    // Bad input, reported as it should be; anything else escapes to the fuzzer.
  }
  return 0;
}
