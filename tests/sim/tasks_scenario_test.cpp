// tasks: and models: (DESIGN.md §10): a multi-model workload as a scenario states it, each task's
// model and pipeline defaulting to the scenario's, and each bad value refused in one located line.
#include <string>

#include <gtest/gtest.h>

#include "sim_test_util.h"

namespace stagecraft::sim::testing {
namespace {

const char* const kBase =
    "name: sweep\n"
    "topology:\n"
    "  device: {name: unit, peak: 1TFLOPS, memory: 16GiB, efficiency: 0.5}\n"
    "  nodes: 1\n"
    "  devices_per_node: 4\n"
    "  host: {memory: 256GiB, bandwidth: 32GB/s, latency: 2us}\n"
    "  links: [{scope: node, bandwidth: 100GB/s, latency: 1us}]\n"
    "models:\n"
    "  small: {mlp: {layers: 4, hidden: 128}}\n"
    "  large: {mlp: {layers: 8, hidden: 512}}\n"
    "model:\n"
    "  mlp: {layers: 4, hidden: 256}\n"
    "pipeline:\n"
    "  schedule: 1f1b\n"
    "  ranks: 2\n"
    "  microbatches: 4\n"
    "tasks:\n"
    "  - {name: a, model: small, steps: 10}\n"
    "  - {name: b, model: large, pipeline: {schedule: gpipe, ranks: 4}}\n"
    "  - {name: c}\n";

TEST(TasksScenario, EachTaskTakesWhatItStatesAndTheScenarioGivesTheRest) {
  ScratchDir dir;
  const Scenario s = LoadScenario(dir.Write("sweep.yaml", kBase), {});
  ASSERT_EQ(s.tasks.size(), 3u);
  EXPECT_EQ(s.pipeline.task_scheduler, TaskScheduler::kLrtf);
  const TaskSpec& a = s.tasks[0];
  EXPECT_EQ(a.name, "a");
  EXPECT_EQ(a.model_name, "small");
  EXPECT_EQ(a.model.mlp->hidden, 128);
  EXPECT_EQ(a.pipeline.steps, 10);
  EXPECT_EQ(a.pipeline.schedules, std::vector<std::string>{"1f1b"});
  EXPECT_EQ(a.pipeline.ranks, 2);
  const TaskSpec& b = s.tasks[1];
  EXPECT_EQ(b.model.mlp->layers, 8);
  EXPECT_EQ(b.pipeline.schedules, std::vector<std::string>{"gpipe"});
  EXPECT_EQ(b.pipeline.ranks, 4);
  EXPECT_EQ(b.pipeline.microbatches, 4);  // the scenario's
  EXPECT_EQ(b.pipeline.steps, 1);
  const TaskSpec& c = s.tasks[2];
  EXPECT_EQ(c.model_name, "");
  EXPECT_EQ(c.model.mlp->hidden, 256);  // the scenario's model
  const Scenario alone = TaskScenario(s, 1);
  EXPECT_EQ(alone.name, "sweep/b");
  EXPECT_TRUE(alone.tasks.empty());
  EXPECT_EQ(alone.pipeline.ranks, 4);
  // --set reaches a task, and the scheduler.
  const Scenario set = LoadScenario(dir.Write("set.yaml", kBase),
                                    {"tasks.2.steps=3", "pipeline.task_scheduler=sequential"});
  EXPECT_EQ(set.tasks[2].pipeline.steps, 3);
  EXPECT_EQ(set.pipeline.task_scheduler, TaskScheduler::kSequential);
  const std::string base(kBase);
  std::string plain = base.substr(0, base.find("tasks:"));
  plain.erase(plain.find("models:"), plain.find("model:\n") - plain.find("models:"));
  EXPECT_TRUE(LoadScenario(dir.Write("plain.yaml", plain), {}).tasks.empty());
}

TEST(TasksScenario, BadTasksAreNamedWhereTheyAre) {
  ScratchDir dir;
  const std::string path = dir.Path("scenario.yaml");
  const std::string unknown = Replace(kBase, "model: large", "model: huge");
  EXPECT_EQ(LoadError(dir, unknown), fmt::format("{}:{}: tasks.1.model: unknown model 'huge' (models: small, large)",
                                                 path, PosOf(unknown, "huge")));
  const std::string twice = Replace(kBase, "name: c", "name: a");
  EXPECT_EQ(LoadError(dir, twice),
            fmt::format("{}:{}: tasks.2.name: task 'a' is listed twice", path, PosOf(twice, "a}\n")));
  const std::string all = Replace(kBase, "schedule: gpipe", "schedule: all");
  EXPECT_NE(LoadError(dir, all).find("tasks.1.pipeline.schedule: a task runs one schedule; got all"), std::string::npos)
      << LoadError(dir, all);
  const std::string too_many = Replace(kBase, "ranks: 4", "ranks: 8");
  EXPECT_NE(LoadError(dir, too_many).find("tasks.1.pipeline"), std::string::npos) << LoadError(dir, too_many);
  const std::string scheduler = Replace(kBase, "ranks: 2\n", "ranks: 2\n  task_scheduler: fifo\n");
  EXPECT_NE(LoadError(dir, scheduler).find("pipeline.task_scheduler: "), std::string::npos) << LoadError(dir, scheduler);
  const std::string own_scheduler = Replace(kBase, "schedule: gpipe", "schedule: gpipe, task_scheduler: sequential");
  EXPECT_NE(LoadError(dir, own_scheduler).find("tasks.1.pipeline.task_scheduler: the workload has one task scheduler"),
            std::string::npos)
      << LoadError(dir, own_scheduler);
  const std::string empty = std::string(kBase).substr(0, std::string(kBase).find("tasks:")) + "tasks: []\n";
  EXPECT_NE(LoadError(dir, empty).find("tasks: expected a list of tasks"), std::string::npos) << LoadError(dir, empty);
  const std::string no_models = std::string(kBase).substr(0, std::string(kBase).find("tasks:"));
  EXPECT_NE(LoadError(dir, no_models).find("models: models are named by tasks"), std::string::npos)
      << LoadError(dir, no_models);
  const std::string list_key = Replace(kBase, "  small: {mlp", "  [a, b]: {mlp");
  EXPECT_NE(LoadError(dir, list_key).find("models: expected model names as keys"), std::string::npos)
      << LoadError(dir, list_key);
  const std::string pipeline_key = Replace(kBase, "pipeline: {schedule: gpipe, ranks: 4}", "pipeline: {[x]: 4}");
  EXPECT_NE(LoadError(dir, pipeline_key).find("tasks.1.pipeline: expected pipeline keys"), std::string::npos)
      << LoadError(dir, pipeline_key);
  const std::string key = Replace(kBase, "name: c", "name: c, optimizer: host");
  EXPECT_NE(LoadError(dir, key).find("tasks.2: unknown key 'optimizer'"), std::string::npos) << LoadError(dir, key);
}

}  // namespace
}  // namespace stagecraft::sim::testing
