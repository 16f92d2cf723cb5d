// A job whose scenario states copies to host memory (pipeline.offload) is refused in one line
// naming the key: the copies are in the IR (schedules/offload.h) but not yet priced or run.
#include <string>

#include <gtest/gtest.h>

#include "stagecraft/base/error.h"
#include "stagecraft/harness/predict.h"
#include "stagecraft/sim/scenario_checks.h"

namespace stagecraft::harness {
namespace {

TEST(OffloadRefused, ByTheKeyBeforeAnyScheduleIsBuilt) {
  const std::string text =
      "name: offload\n"
      "topology:\n"
      "  device: {name: unit, peak: 1TFLOPS, memory: 16GiB, efficiency: 0.5}\n"
      "  nodes: 1\n"
      "  devices_per_node: 2\n"
      "  host: {memory: 256GiB, bandwidth: 32GB/s}\n"
      "  links: [{scope: node, bandwidth: 100GB/s, latency: 1us}]\n"
      "model:\n"
      "  mlp: {layers: 4, hidden: 256}\n"
      "pipeline: {schedule: 1f1b, ranks: 2, microbatches: 4}\n";
  for (const char* set : {"pipeline.offload.activations=0.5", "pipeline.offload.weights=spill",
                          "pipeline.offload.optimizer=host"}) {
    SCOPED_TRACE(set);
    const sim::Scenario sc = sim::LoadScenarioFromText(text, "offload.yaml", {set});
    try {
      ScenarioSchedules(sc, sc.pipeline.schedules);
      ADD_FAILURE() << "built";
    } catch (const InputError& e) {
      EXPECT_EQ(std::string(e.what()),
                "pipeline.offload: copies between device and host memory are not simulated or executed yet");
    }
  }
  const sim::Scenario plain = sim::LoadScenarioFromText(text, "plain.yaml", {});
  EXPECT_EQ(ScenarioSchedules(plain, plain.pipeline.schedules).size(), 1u);
}

}  // namespace
}  // namespace stagecraft::harness
