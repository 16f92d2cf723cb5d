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
// config.layers_per_stage, on MakeDataset's data (cycled as a long run cycles it). A non-zero
// `perturb` scales each initial weight by 1 + perturb·u, u uniform in [-1/2, 1/2) (a fixed
// sequence): the conditioning check's change of rounding-error size.
GptReferenceResult TrainGptReference(const exec::TrainingConfig& config, int microbatches, int steps,
                                     Staleness staleness, bool vertical_sync, double perturb = 0);

// The executor suite's transformer: small enough for 4 ranks on 2 cores, with a block per stage
// even when interleaved.
inline const exec::GptModel kTestGpt{.layers = 8, .hidden = 16, .heads = 2, .seq = 8, .vocab = 32, .seed = 7};

// Adam's learning rates in the executor suite. Adam moves every weight about lr per update
// whatever its gradient's scale, so weight stashing (an update per microbatch, 24 in the suite's
// 3 steps of 8) takes a tenth of the per-step rate. At 0.01 those 24 updates amplify a 1e-7
// change of kTestGpt's initial weights 2000-fold, to 1e-4: past the fp32 tolerance (1e-5), so
// the GPU's other summation order failed the comparison while the training was right. At 0.001
// they amplify it under 10-fold. reference_test.cpp checks both rates stay well conditioned.
inline constexpr float kAdamLr = 0.01f;
inline constexpr float kAdamLrPerMicrobatch = 0.001f;

}  // namespace stagecraft::testing
