// What the step graphs' tests on the cpu (step_graphs_test.cpp) and on a GPU
// (exec_gpu/step_graphs_gpu_test.cpp) share: a one-rank schedule, a run with the step graphs
// on or off over a dataset of 3 microbatches (the steps cycle through it across step
// boundaries), and the check that every op of a run has its time, in order on the rank's one
// stream.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include "fake_transport.h"
#include "stagecraft/exec/runtime.h"
#include "stagecraft/schedules/generators.h"
#include "stagecraft/schedules/lower.h"

namespace stagecraft::testing {

inline schedules::Schedule StepGraphSchedule(const std::string& name, int ranks, int chunks, int microbatches,
                                             int steps) {
  schedules::GeneratorParams p;
  p.ranks = ranks;
  p.chunks = chunks;
  p.microbatches = microbatches;
  p.steps = steps;
  return schedules::Lower(schedules::Generate(name, p));
}

// The small models the step graphs' cpu tests train: an MLP of hidden 8 (SGD) or a GPT of hidden
// 16 (Adam), `layers_per_stage` layers on each of `stages` stages.
inline exec::TrainingConfig StepGraphConfig(bool gpt, int stages, int layers_per_stage) {
  exec::TrainingConfig c;
  const int layers = stages * layers_per_stage;
  if (gpt) {
    c.gpt = exec::GptModel{.layers = layers, .hidden = 16, .heads = 2, .seq = 8, .vocab = 32, .seed = 5};
    c.microbatch_size = 2;
    c.optimizer = "adam";
    c.lr = 1e-3f;
  } else {
    c.model = exec::MlpModel{.layers = layers, .hidden = 8, .seed = 11};
    c.microbatch_size = 3;
    c.lr = 0.05f;
  }
  c.layers_per_stage.assign(static_cast<size_t>(stages), layers_per_stage);
  return c;
}

// A parameterised case's name from its parts: gtest's names take no '-'.
inline std::string StepGraphCaseName(std::string name) {
  std::replace(name.begin(), name.end(), '-', '_');
  return name;
}

// `after_data` runs once the dataset is made, before the run (a counting device resets there).
inline exec::RankRun RunStepGraphs(exec::Device& device, const schedules::Schedule& s,
                                   const exec::TrainingConfig& config, bool graphs,
                                   const std::function<void()>& after_data = {}) {
  FakeTransport transport;
  const exec::Dataset data = exec::MakeDataset(device, config, 3, true, true);
  if (after_data) after_data();
  exec::RunHooks hooks;
  hooks.keep_final_params = true;
  hooks.step_graphs = graphs;
  return exec::RunRank(s, config, data, device, transport, hooks);
}

inline void ExpectOpsTimedInOrder(const schedules::Schedule& s, const exec::RankRun& run) {
  const std::vector<schedules::Op>& ops = s.ops[0];
  int64_t last_end = 0;
  for (size_t i = 0; i < ops.size(); ++i) {
    const schedules::OpTiming& t = run.record.ops[i];
    ASSERT_GE(t.start_ns, last_end) << schedules::ActionString(ops[i], s.microbatches) << " step " << ops[i].step;
    ASSERT_GE(t.end_ns, t.start_ns);
    last_end = t.end_ns;
  }
}

}  // namespace stagecraft::testing
