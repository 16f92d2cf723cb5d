// training.lr_schedule, training.pipemare, training.target_loss and loss_window (DESIGN.md §10):
// read as stated, and each kind of bad input refused in one line naming its key.
#include <gtest/gtest.h>

#include <string>

#include "sim_test_util.h"
#include "stagecraft/sim/scenario_checks.h"

namespace stagecraft::sim {
namespace {

using testing::ErrorOf;
using testing::ScratchDir;

const std::string kBase = R"(name: tiny
topology:
  device: {name: gpu, peak: 100TFLOPS, memory: 16GiB, efficiency: 0.5}
  nodes: 1
  devices_per_node: 4
  links:
    - {scope: node, bandwidth: 100GB/s, latency: 2us}
model:
  mlp: {layers: 8, hidden: 64}
pipeline:
  schedule: [1f1b, pipemare]
  ranks: 4
  microbatches: 8
)";

Scenario Load(const ScratchDir& dir, const std::string& training, const std::string& extra = "") {
  const std::string path = dir.Write("scenario.yaml", kBase);
  std::vector<std::string> sets = {"training=" + training};
  if (!extra.empty()) sets.push_back(extra);
  return LoadScenario(path, sets);
}

TEST(TrainingSpec, ReadsTheScheduleThePipeMareBlockAndTheTarget) {
  ScratchDir dir;
  const Scenario s = Load(dir, "{optimizer: sgd, lr: 0.1, lr_schedule: {warmup_steps: 5, decay: cosine, min_lr: 0.01}, "
                               "pipemare: {lr_reschedule_steps: 20, correction: true, correction_decay: 0.5}, "
                               "target_loss: 0.25, loss_window: 4}");
  EXPECT_EQ(s.training.lr_schedule.warmup_steps, 5);
  EXPECT_EQ(s.training.lr_schedule.decay, LrDecay::kCosine);
  EXPECT_DOUBLE_EQ(s.training.lr_schedule.min_lr, 0.01);
  ASSERT_TRUE(s.training.pipemare.has_value());
  EXPECT_EQ(s.training.pipemare->lr_reschedule_steps, 20);
  EXPECT_TRUE(s.training.pipemare->correction);
  EXPECT_DOUBLE_EQ(s.training.pipemare->correction_decay, 0.5);
  EXPECT_EQ(s.training.target_loss, 0.25);
  EXPECT_EQ(s.training.loss_window, 4);
  // Left out: no warm-up, no decay, no PipeMare technique, no target, a window of one step.
  const Scenario plain = Load(dir, "{optimizer: sgd, lr: 0.1}");
  EXPECT_EQ(plain.training.lr_schedule.warmup_steps, 0);
  EXPECT_EQ(plain.training.lr_schedule.decay, LrDecay::kNone);
  EXPECT_FALSE(plain.training.pipemare.has_value());
  EXPECT_FALSE(plain.training.target_loss.has_value());
  EXPECT_EQ(plain.training.loss_window, 1);
}

TEST(TrainingSpec, BadValuesAreOneLineAtTheirKey) {
  ScratchDir dir;
  const auto error = [&](const std::string& training, const std::string& extra = "") {
    return ErrorOf([&] { Load(dir, training, extra); });
  };
  const std::string at = "--set training: training.";
  EXPECT_EQ(error("{optimizer: sgd, lr: 0.1, lr_schedule: {warmup_steps: 0}}"),
            at + "lr_schedule.warmup_steps: expected an integer in [1, 1048576], got '0'");
  EXPECT_EQ(error("{optimizer: sgd, lr: 0.1, lr_schedule: {warmup_steps: -3}}"),
            at + "lr_schedule.warmup_steps: expected an integer in [1, 1048576], got '-3'");
  EXPECT_EQ(error("{optimizer: sgd, lr: 0.1, lr_schedule: {decay: step}}"),
            at + "lr_schedule.decay: expected one of none, linear, cosine, got 'step'");
  EXPECT_EQ(error("{optimizer: sgd, lr: 0.1, pipemare: {correction_decay: 1}}"),
            at + "pipemare.correction_decay: expected a decay in [0, 1) (1 would never move the velocity)");
  EXPECT_EQ(error("{optimizer: sgd, lr: 0.1, target_loss: 0}"), at + "target_loss: expected a number > 0, got '0'");
  EXPECT_EQ(error("{optimizer: sgd, lr: 0.1, loss_window: 0}"),
            at + "loss_window: expected an integer in [1, 1048576], got '0'");
  // Across keys: a decay below its end, PipeMare's techniques without pipemare, a target without a loss.
  const std::string path = dir.Write("scenario.yaml", kBase);
  const std::string decay = error("{optimizer: sgd, lr: 0.1, lr_schedule: {decay: linear, min_lr: 0.2}}");
  EXPECT_NE(decay.find("training.lr_schedule.min_lr: 0.2 is above training.lr 0.1"), std::string::npos) << decay;
  // PipeMare's techniques where pipemare does not run: refused where a user runs the scenario
  // (simulate, execute), not by the loader, which a replay or a plan narrows to one schedule.
  const Scenario narrowed = Load(dir, "{optimizer: sgd, lr: 0.1, pipemare: {correction: true}}", "pipeline.schedule=[gpipe, 1f1b]");
  EXPECT_NO_THROW(CheckPipeMareRuns(Load(dir, "{optimizer: sgd, lr: 0.1, pipemare: {correction: true}}")));
  const std::string synchronous = ErrorOf([&] { CheckPipeMareRuns(narrowed); });
  EXPECT_NE(synchronous.find("training.pipemare: rescheduling and correction act on schedule pipemare, which "
                             "pipeline.schedule does not run (gpipe, 1f1b)"),
            std::string::npos)
      << synchronous;
  EXPECT_EQ(synchronous.find('\n'), std::string::npos);
  const std::string no_loss = error("{optimizer: sgd, lr: 0.1, target_loss: 0.5}",
                                    "model={costs: {forward: 1ms, backward_input: 2ms, backward_weight: 1ms}}");
  EXPECT_NE(no_loss.find("training.target_loss: a target loss needs a run that trains a network"), std::string::npos)
      << no_loss;
}

}  // namespace
}  // namespace stagecraft::sim
