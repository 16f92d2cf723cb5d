// What a run needs before its clock starts: the executor's configuration from a scenario, the
// layers of each stage, and the dataset a rank feeds or scores (see runtime.h).
#include <algorithm>

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

std::unique_ptr<StageModel> MakeStage(Device& device, const TrainingConfig& config, int first_layer, int layers,
                                      bool first_stage, bool last_stage) {
  if (config.gpt) {
    return std::make_unique<GptStage>(device, *config.gpt, config.microbatch_size, first_layer, layers, first_stage,
                                      last_stage);
  }
  return std::make_unique<MlpStage>(device, LayersShape(config, first_layer, layers), config.model);
}

int FirstLayerOf(const TrainingConfig& config, int stage) {
  int first = 0;
  for (int s = 0; s < stage; ++s) first += config.layers_per_stage.at(static_cast<size_t>(s));
  return first;
}

std::unique_ptr<StageModel> MakeStage(Device& device, const schedules::Schedule& schedule,
                                      const TrainingConfig& config, int stage) {
  const std::vector<int>& counts = config.layers_per_stage;
  SC_CHECK(static_cast<int>(counts.size()) == schedule.stages(),
           fmt::format("the plan gives one layer count per stage: {} for {} stages", counts.size(), schedule.stages()));
  return MakeStage(device, config, FirstLayerOf(config, stage), counts[stage], stage == 0,
                   stage == schedule.stages() - 1);
}

int NetworkLayers(const TrainingConfig& config) { return config.gpt ? config.gpt->layers : config.model.layers; }

int64_t InputFloats(const TrainingConfig& config) {
  return config.gpt ? int64_t{config.microbatch_size} * config.gpt->seq
                    : int64_t{config.microbatch_size} * config.model.hidden;
}

int64_t BoundaryFloats(const TrainingConfig& config) {
  return config.gpt ? int64_t{config.microbatch_size} * config.gpt->seq * config.gpt->hidden
                    : int64_t{config.microbatch_size} * config.model.hidden;
}

LossShape LossShapeFor(const TrainingConfig& config) {
  if (config.gpt) {
    const int positions = config.microbatch_size * config.gpt->seq;
    return {kernels::LossKind::kCrossEntropy, positions, config.gpt->vocab, positions};
  }
  return {config.model.loss, config.microbatch_size, config.model.hidden,
          TargetFloats(config.model, config.microbatch_size)};
}

TrainingConfig TrainingConfigFor(const sim::Scenario& sc) {
  if (!sc.model.mlp && !sc.model.transformer) {
    throw stagecraft::InputError(fmt::format(
        "{}: model: the executor builds model.mlp and model.transformer networks; this scenario has neither (it can be "
        "simulated only)",
        sc.path));
  }
  if (!sc.has_training) throw stagecraft::InputError(fmt::format("{}: execute needs a training block", sc.path));
  // What the simulator models and the executor does not run yet.
  const sim::PipelineSpec& p = sc.pipeline;
  if (p.tensor_parallel > 1) {
    throw stagecraft::InputError(fmt::format(
        "{}: pipeline.tensor_parallel: the executor runs data-parallel replicas of a pipeline, one device per "
        "process (tensor {} is simulated only)",
        sc.path, p.tensor_parallel));
  }
  if (p.context_parallel > 1) {
    throw stagecraft::InputError(fmt::format(
        "{}: pipeline.context_parallel: the executor runs whole sequences on each device (context {} is simulated "
        "only)",
        sc.path, p.context_parallel));
  }
  if (p.zero > 0) {
    throw stagecraft::InputError(fmt::format(
        "{}: pipeline.zero: the executor all-reduces every replica's gradients (ZeRO is simulated only)", sc.path));
  }
  if (p.recompute == sim::Recompute::kSelective) {
    throw stagecraft::InputError(fmt::format(
        "{}: pipeline.recompute: selective is modelled by the simulator only; the executor recomputes none or full",
        sc.path));
  }
  if (!(sc.training.lr > 0)) throw stagecraft::InputError(fmt::format("{}: training.lr must be > 0", sc.path));
  TrainingConfig c;
  c.microbatch_size = sc.pipeline.microbatch_size;
  c.data_parallel = std::max(p.data_parallel, 1);
  c.optimizer = std::string(sim::Name(sc.training.optimizer));
  c.lr = static_cast<float>(sc.training.lr);
  c.momentum = static_cast<float>(sc.training.momentum);
  c.optimizer_on_host = sc.pipeline.offload.optimizer == sim::OptimizerPlace::kHost;
  c.loss_scale = sc.training.loss_scale > 0               ? static_cast<float>(sc.training.loss_scale)
                 : sc.training.dtype == sim::Dtype::kFp16 ? 4096.0f
                                                          : 1.0f;
  c.model.seed = static_cast<uint64_t>(sc.training.seed);
  c.lr_schedule = sc.training.lr_schedule;
  c.pipemare = sc.training.pipemare;
  if (const auto& t = sc.model.transformer) {
    if (!t->IsGpt2Block()) {
      throw stagecraft::InputError(fmt::format(
          "{}: model.transformer: the executor builds GPT-2's block (gelu, ffn_hidden 4 x hidden, kv_heads = heads, "
          "an untied head, unfused attention); ffn_hidden, activation: swiglu, kv_heads, head_dim, attention: flash, "
          "bias: false, tied_embeddings, moe, mla and sliding_window are simulated only",
          sc.path));
    }
    c.gpt = GptModel{.layers = t->layers, .hidden = t->hidden, .heads = t->heads, .seq = t->seq, .vocab = t->vocab,
                     .seed = c.model.seed};
    if (!sc.training.data_path.empty()) {
      // What any dataset can read: kMaxDatasetMicrobatches microbatches' windows (gpt.h).
      const int64_t used = kMaxDatasetMicrobatches * c.microbatch_size * c.data_parallel * t->seq + t->seq + 1;
      c.gpt->data = LoadTokenFile(sc.training.data_path, t->vocab, t->seq, used);
    }
    return c;
  }
  c.model.layers = sc.model.mlp->layers;
  c.model.hidden = sc.model.mlp->hidden;
  c.model.residual = sc.model.mlp->residual;
  c.model.activation =
      sc.model.mlp->activation == sim::Activation::kRelu ? kernels::Activation::kRelu : kernels::Activation::kGelu;
  c.model.loss =
      sc.model.mlp->loss == sim::Loss::kCrossEntropy ? kernels::LossKind::kCrossEntropy : kernels::LossKind::kMse;
  if (!sc.training.data_path.empty()) {  // a labelled set to classify (model.h)
    if (c.model.loss != kernels::LossKind::kCrossEntropy) {
      throw stagecraft::InputError(fmt::format("{}: training.data: the MLP classifies a labelled set; it needs "
                                               "model.mlp.loss: cross_entropy",
                                               sc.path));
    }
    c.model.data = LoadLabeledSet(sc.training.data_path, c.model.hidden);
  }
  return c;
}

TrainingConfig WholeBatch(const TrainingConfig& config) {
  TrainingConfig whole = config;
  whole.microbatch_size = config.microbatch_size * config.data_parallel;
  whole.data_parallel = 1;
  return whole;
}

int64_t DatasetMicrobatches(const TrainingConfig& config, int64_t total) {
  const TrainingConfig whole = WholeBatch(config);
  const int64_t bytes = (InputFloats(whole) + LossShapeFor(whole).target_floats) * static_cast<int64_t>(sizeof(float));
  const int64_t fit = std::max<int64_t>(1, kMaxDatasetBytes / std::max<int64_t>(bytes, 1));
  return std::max<int64_t>(1, std::min({total, kMaxDatasetMicrobatches, fit}));
}

namespace {

// Every microbatch of the whole batch (D·b samples) as `config` builds it.
void WholeMicrobatches(Device& device, const TrainingConfig& whole, int64_t count, std::vector<float>* inputs,
                       std::vector<float>* targets, const std::function<void()>& beat) {
  const int rows = whole.microbatch_size;
  const int64_t in_per = InputFloats(whole), target_per = LossShapeFor(whole).target_floats;
  const bool with_inputs = !inputs->empty(), with_targets = !targets->empty();
  if (whole.gpt) {
    std::vector<float> x(static_cast<size_t>(in_per)), y(static_cast<size_t>(target_per));
    for (int64_t g = 0; g < count && (with_inputs || with_targets); ++g) {
      GptMicrobatch(*whole.gpt, rows, g, x.data(), y.data());
      if (with_inputs) std::copy(x.begin(), x.end(), inputs->begin() + g * in_per);
      if (with_targets) std::copy(y.begin(), y.end(), targets->begin() + g * target_per);
      if (beat) beat();
    }
    return;
  }
  for (int64_t g = 0; g < count && with_inputs; ++g) MicrobatchInput(whole.model, rows, g, inputs->data() + g * in_per);
  if (with_targets) TeacherTargets(device, whole.model, rows, 0, count, targets->data(), beat);
}

// Replica `replica`'s slice of each of `count` microbatches of `whole` (D slices each).
std::vector<float> Slices(const std::vector<float>& whole, int64_t count, int replicas, int replica) {
  if (replicas == 1 || whole.empty()) return whole;
  const int64_t per = static_cast<int64_t>(whole.size()) / count, slice = per / replicas;
  SC_CHECK(per * count == static_cast<int64_t>(whole.size()) && slice * replicas == per, "whole microbatches");
  std::vector<float> out(static_cast<size_t>(slice * count));
  for (int64_t g = 0; g < count; ++g) {
    ReplicaSlice(whole.data() + g * per, replicas, replica, slice, out.data() + g * slice);
  }
  return out;
}

Buffer Upload(Device& device, const std::vector<float>& host) {
  if (host.empty()) return {};
  Buffer b(device, static_cast<int64_t>(host.size()));
  device.memory().Upload(b.data(), host.data(), b.size());
  return b;
}

}  // namespace

Dataset MakeDataset(Device& device, const TrainingConfig& config, int64_t total, bool with_inputs, bool with_targets,
                    const std::function<void()>& beat, int replica) {
  SC_CHECK(config.data_parallel >= 1 && replica >= 0 && replica < config.data_parallel, "a replica of the run");
  const TrainingConfig whole = WholeBatch(config);
  Dataset d;
  d.microbatches = DatasetMicrobatches(config, total);
  std::vector<float> inputs(static_cast<size_t>(with_inputs ? InputFloats(whole) * d.microbatches : 0));
  const int64_t target_floats = LossShapeFor(whole).target_floats * d.microbatches;
  std::vector<float> targets(static_cast<size_t>(with_targets ? target_floats : 0));
  WholeMicrobatches(device, whole, d.microbatches, &inputs, &targets, beat);
  d.inputs = Upload(device, Slices(inputs, d.microbatches, config.data_parallel, replica));
  d.targets = Upload(device, Slices(targets, d.microbatches, config.data_parallel, replica));
  return d;
}

}  // namespace stagecraft::exec
