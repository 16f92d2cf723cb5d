// Tests for sim/src/scenario_limits.cpp: a scenario's whole run bounded from its schedules'
// counts at load, before any schedule is built (one year at its edge, the issue's run).
#include <gtest/gtest.h>

#include <string>

#include "sim_test_util.h"

namespace stagecraft::sim {
namespace {

using testing::ErrorOf;
using testing::ScratchDir;

constexpr const char* kScenario = R"(name: year
topology: {device: {name: d, peak: 1TFLOPS, memory: 1GiB}, devices_per_node: 1}
model:
  costs: {forward: 1800s, backward_input: 1800s, backward_weight: 0}
pipeline: {schedule: gpipe, ranks: 1, microbatches: 8766}
)";

// The same year from the scenario alone, at load, before any schedule is built.
TEST(ScenarioLimits, OneYearIsTheLimitAtLoad) {
  ScratchDir dir;
  const std::string path = dir.Write("year.yaml", kScenario);
  EXPECT_EQ(ErrorOf([&] { LoadScenario(path, {}); }), "");
  EXPECT_EQ(ErrorOf([&] { LoadScenario(path, {"model.costs.forward=1800000000001ns"}); }),
            path + ": gpipe could run for up to 31557600.00001 s of simulated time (8766 microbatches x 1 step over 1 "
                   "stage; one microbatch's forward and backward take 3.6e+03 s on stage 0), above the limit of 1 year "
                   "(3.2e+07 s); fewer microbatches or steps, or shorter ops, would fit");
  // Steps multiply: 2 steps of 4383 microbatches are the same year.
  EXPECT_EQ(ErrorOf([&] { LoadScenario(path, {"pipeline.microbatches=4383", "pipeline.steps=2"}); }), "");
  EXPECT_NE(ErrorOf([&] { LoadScenario(path, {"pipeline.microbatches=4383", "pipeline.steps=3"}); }), "");
}

// The issue's run: forward 1000 s over 100,000 microbatches on 4 ranks is refused at load.
TEST(ScenarioLimits, ThousandSecondForwardsOverAHundredThousandMicrobatches) {
  const std::string path = STAGECRAFT_SOURCE_DIR "/scenarios/uniform-costs.yaml";
  EXPECT_EQ(ErrorOf([&] {
              LoadScenario(path, {"model.costs.forward=1000s", "pipeline.microbatches=100000", "pipeline.schedule=1f1b"});
            }),
            path + ": 1f1b could run for up to 4e+08 s of simulated time (100000 microbatches x 1 step over 4 stages; "
                   "one microbatch's forward and backward take 1e+03 s on stage 0), above the limit of 1 year "
                   "(3.2e+07 s); fewer microbatches or steps, or shorter ops, would fit");
}

}  // namespace
}  // namespace stagecraft::sim
