// What a run needs before its clock starts: the executor's configuration from a scenario, the
// layers of each stage, and the dataset a rank feeds or scores (see runtime.h).
#include <fmt/format.h>

#include "stagecraft/base/check.h"
#include "stagecraft/base/error.h"
#include "stagecraft/exec/runtime.h"

namespace stagecraft::exec {

StageShape LayersShape(const TrainingConfig& config, int first_layer, int layers) {
  StageShape shape;
  shape.first_layer = first_layer;
  shape.layers = layers;
  shape.hidden = config.model.hidden;
  shape.rows = config.microbatch_size;
  shape.residual = config.model.residual;
  shape.activation = config.model.activation;
  return shape;
}

StageShape StageShapeFor(const schedules::Schedule& schedule, const TrainingConfig& config, int stage) {
  const std::vector<int>& counts = config.layers_per_stage;
  SC_CHECK(static_cast<int>(counts.size()) == schedule.stages(),
           fmt::format("the plan gives one layer count per stage: {} for {} stages", counts.size(), schedule.stages()));
  int first = 0;
  for (int s = 0; s < stage; ++s) first += counts[s];
  return LayersShape(config, first, counts[stage]);
}

TrainingConfig TrainingConfigFor(const sim::Scenario& sc) {
  if (!sc.model.mlp) {
    throw stagecraft::InputError(fmt::format(
        "{}: model: the executor builds model.mlp networks; this scenario has none (it can be simulated only)", sc.path));
  }
  if (!sc.has_training) throw stagecraft::InputError(fmt::format("{}: execute needs a training block", sc.path));
  if (!(sc.training.lr > 0)) throw stagecraft::InputError(fmt::format("{}: training.lr must be > 0", sc.path));
  TrainingConfig c;
  c.model.layers = sc.model.mlp->layers;
  c.model.hidden = sc.model.mlp->hidden;
  c.model.residual = sc.model.mlp->residual;
  c.model.activation = sc.model.mlp->activation == "relu" ? kernels::Activation::kRelu : kernels::Activation::kGelu;
  c.model.loss = sc.model.mlp->loss == "cross_entropy" ? kernels::LossKind::kCrossEntropy : kernels::LossKind::kMse;
  c.model.seed = static_cast<uint64_t>(sc.training.seed);
  c.microbatch_size = sc.pipeline.microbatch_size;
  c.optimizer = sc.training.optimizer;
  c.lr = static_cast<float>(sc.training.lr);
  c.momentum = static_cast<float>(sc.training.momentum);
  return c;
}

Dataset MakeDataset(Device& device, const MlpModel& model, int rows, int64_t microbatches, bool with_inputs,
                    bool with_targets) {
  Dataset d;
  d.microbatches = microbatches;
  if (with_inputs) {
    const int64_t per = static_cast<int64_t>(rows) * model.hidden;
    std::vector<float> host(static_cast<size_t>(per * microbatches));
    for (int64_t g = 0; g < microbatches; ++g) MicrobatchInput(model, rows, g, host.data() + g * per);
    d.inputs = Buffer(device, per * microbatches);
    device.Upload(d.inputs.data(), host.data(), host.size());
  }
  if (with_targets) {
    const int64_t per = TargetFloats(model, rows);
    std::vector<float> host(static_cast<size_t>(per * microbatches));
    MicrobatchTargets(model, rows, 0, microbatches, host.data());
    d.targets = Buffer(device, per * microbatches);
    device.Upload(d.targets.data(), host.data(), host.size());
  }
  return d;
}

}  // namespace stagecraft::exec
