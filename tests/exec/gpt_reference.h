// A sequential reference trainer for the executor's transformer: no pipeline, no transport and
// no schedule; the stages (GptStage, whose math tests/exec/gpt_stage_test.cpp checks against
// PyTorch) run one microbatch at a time, each reading the weight version its staleness names
// (reference.h's Staleness, the same three policies), and the optimizer steps as the policy
// says. The executor's final weights after any schedule are checked against it.
#pragma once

#include <vector>

#include "reference.h"
#include "stagecraft/exec/runtime.h"

namespace stagecraft::testing {

struct GptReferenceResult {
  std::vector<std::vector<float>> stage_params;  // final weights per stage (GptStage layout)
  std::vector<std::vector<float>> initial_params;
  std::vector<double> losses;                   // per step, mean of its microbatch losses
};

// Trains `steps` steps of `microbatches` microbatches of config.gpt split as
// config.layers_per_stage, on MakeDataset's data (cycled as a long run cycles it).
GptReferenceResult TrainGptReference(const exec::TrainingConfig& config, int microbatches, int steps,
                                     Staleness staleness, bool vertical_sync);

}  // namespace stagecraft::testing
