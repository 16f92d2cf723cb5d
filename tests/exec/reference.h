// A sequential reference trainer for the executor's MLP: naive double-precision loops over the
// whole model, no pipeline, BLAS or kernels/ math. Only the initial weights and the data come
// from exec/model.h, so the executor's final weights can be checked against it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "stagecraft/exec/model.h"

namespace stagecraft::testing {

// Which weights each microbatch reads (the weight policies of schedules/weights.h):
//   kFlush:     every microbatch of step t reads the weights after t updates (GPipe, 1F1B, ...).
//   kTwoBW:     PipeDream-2BW (Narayanan et al., ICML'21 §3.1): step t reads version max(t − 1, 0).
//   kPipeDream: weight stashing with one update per microbatch (Narayanan et al., SOSP'19):
//               microbatch g reads, at stage s of n, version max(0, g − (n − s) + 1).
//   kPipeMare:  no stash, one update per microbatch (Yang et al., MLSys'21): microbatch g's
//               forward reads stage s's version max(0, g − (n − s) + 1) as PipeDream's does, its
//               backward the newest, version g (the 1F1B order has applied every earlier one).
enum class Staleness { kFlush, kTwoBW, kPipeDream, kPipeMare };

struct ReferenceConfig {
  exec::MlpModel model;
  int microbatch_size = 1;
  int microbatches = 1;  // per step
  int steps = 1;
  std::string optimizer = "sgd";  // "sgd" (with momentum) or "adam"
  double lr = 0.01;
  double momentum = 0.9;  // sgd only; 0 is plain SGD
  Staleness staleness = Staleness::kFlush;
  std::vector<int> layers_per_stage;  // kPipeDream only; empty means one stage
  bool vertical_sync = false;         // kPipeDream: every stage reads max(0, g − n + 1)
  // The data cycles through this many microbatches: microbatch g trains on the data of
  // g mod dataset_microbatches (0: every microbatch its own).
  int64_t dataset_microbatches = 0;
  // training.lr_schedule, restated here from DESIGN.md §10 rather than read from exec: a linear
  // warm-up over warmup_steps steps, then "none", "linear" or "cosine" decay to min_lr by the
  // last update.
  int64_t warmup_steps = 0;
  std::string decay = "none";
  double min_lr = 0;
  // kPipeMare's techniques (training.pipemare): stage s's rate divided by its delay
  // τ = max(n − 1 − s, 1) to the power 1 − min(k/K, 1), k in steps (K = 0: off); the backward's
  // weights w − c·δ with c = min(g, n − 1 − s) and δ ← γδ + (1 − γ)(w_new − w_old) per update.
  int64_t lr_reschedule_steps = 0;
  bool correction = false;
  double correction_decay = 0.9;
};

struct ReferenceResult {
  std::vector<std::vector<double>> weights;  // per layer, [h*h] row-major [out][in]
  std::vector<std::vector<double>> biases;   // per layer, [h]
  std::vector<double> losses;                // per step, mean of its microbatch losses
};

// Trains `config.steps` steps from InitLayer's weights on MicrobatchInput/MicrobatchTarget data.
// Throws std::invalid_argument on a bad config.
ReferenceResult TrainReference(const ReferenceConfig& config);

// ---- Building blocks, public so that tests can check the oracle against finite differences
// ---- and hand-worked updates.

struct LayerParams {
  std::vector<double> weight;  // [h*h] row-major [out][in]
  std::vector<double> bias;    // [h]
};

struct ReferenceBatch {
  int rows = 0;
  std::vector<double> inputs;   // [rows*h]
  std::vector<double> targets;  // [rows*h] for mse, [rows] class indices for cross_entropy
};

// InitLayer's weights of every layer, widened to double.
std::vector<LayerParams> ReferenceInitialParams(const exec::MlpModel& model);

// Global microbatch `g` of `rows` rows, from MicrobatchInput/MicrobatchTarget.
ReferenceBatch ReferenceMicrobatch(const exec::MlpModel& model, int rows, int64_t g);

// Mean loss of one microbatch at `params` (one entry per layer). When `grads` is not null it
// is overwritten with d(loss)/d(params), same shapes.
double ReferenceLossAndGrad(const exec::MlpModel& model, const std::vector<LayerParams>& params,
                            const ReferenceBatch& batch, std::vector<LayerParams>* grads);

}  // namespace stagecraft::testing
