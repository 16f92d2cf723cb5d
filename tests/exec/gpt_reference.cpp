// The transformer's sequential reference (see gpt_reference.h).
#include "gpt_reference.h"

#include <algorithm>
#include <cstdint>
#include <deque>
#include <memory>

#include "stagecraft/exec/cpu_device.h"
#include "stagecraft/exec/optimizer.h"

namespace stagecraft::testing {

GptReferenceResult TrainGptReference(const exec::TrainingConfig& config, int microbatches, int steps,
                                     Staleness staleness, bool vertical_sync, double perturb) {
  auto device = exec::MakeCpuDevice();
  const exec::GptModel& m = *config.gpt;
  const int n = static_cast<int>(config.layers_per_stage.size());
  std::vector<std::unique_ptr<exec::GptStage>> stages;
  std::vector<std::unique_ptr<exec::Optimizer>> optimizers;
  std::vector<std::deque<exec::Buffer>> versions(n);  // per stage, oldest .. newest
  std::vector<int> oldest(n, 0);                      // the version index versions[s].front() holds
  GptReferenceResult result;
  for (int s = 0; s < n; ++s) {
    stages.push_back(std::make_unique<exec::GptStage>(*device, m, config.microbatch_size, exec::FirstLayerOf(config, s),
                                                      config.layers_per_stage[s], s == 0, s == n - 1));
    optimizers.push_back(std::make_unique<exec::Optimizer>(*device, config, stages[s]->ParamFloats()));
    exec::Buffer w(*device, stages[s]->ParamFloats());
    stages[s]->InitParams(w.data());
    if (perturb != 0) {
      uint32_t state = 12345u + static_cast<uint32_t>(s);  // a linear congruential sequence per stage
      for (int64_t i = 0; i < w.size(); ++i) {
        state = state * 1664525u + 1013904223u;
        const double u = static_cast<double>(state >> 8) / 16777216.0 - 0.5;
        w.data()[i] = static_cast<float>(w.data()[i] * (1.0 + perturb * u));
      }
    }
    result.initial_params.emplace_back(w.data(), w.data() + w.size());
    versions[s].push_back(std::move(w));
  }
  const exec::Dataset data = exec::MakeDataset(*device, config, int64_t{microbatches} * steps, true, true);
  const exec::LossShape loss_shape = exec::LossShapeFor(config);
  const int64_t in_floats = exec::InputFloats(config);
  auto version_at = [&](int s, int v) -> const float* { return versions[s].at(static_cast<size_t>(v - oldest[s])).data(); };
  auto newest = [&](int s) { return oldest[s] + static_cast<int>(versions[s].size()) - 1; };
  // Adds microbatch g's gradients (stage s reading version read[s]) into grads[s] (written when
  // `first`); returns its loss.
  // The backward reads version back[s] (PipeMare's newest; the forward's otherwise).
  auto microbatch = [&](int64_t g, const std::vector<int>& read, const std::vector<int>& back,
                        std::vector<exec::Buffer>& grads, bool first) {
    std::vector<exec::Activations> saved(n);
    exec::Buffer x(*device, in_floats);
    // The executor's dataset, cycled as a long run cycles it (Dataset::MicrobatchOf).
    const int64_t d = data.MicrobatchOf(g);
    device->memory().Copy(x.data(), data.inputs.data() + d * in_floats, in_floats);
    for (int s = 0; s < n; ++s) x = stages[s]->Forward(version_at(s, read[s]), std::move(x), &saved[s], true);
    exec::Buffer dy(*device, x.size());
    float loss = 0;
    device->ops().loss.forward(device->op_context(), loss_shape.kind, loss_shape.rows, loss_shape.cols, x.data(),
                               data.targets.data() + d * loss_shape.target_floats, dy.data(), &loss, 1.0f);
    for (int s = n - 1; s >= 0; --s) {
      dy = stages[s]->Backward(version_at(s, back[s]), std::move(dy), &saved[s], {grads[s].data(), !first});
    }
    return static_cast<double>(loss);
  };
  auto update = [&](int s, exec::Buffer& grad, float scale) {
    exec::Buffer next(*device, stages[s]->ParamFloats());
    optimizers[s]->Step(version_at(s, newest(s)), next.data(), grad.data(), scale, config.lr);
    versions[s].push_back(std::move(next));
  };
  std::vector<exec::Buffer> grads;
  for (int s = 0; s < n; ++s) grads.emplace_back(*device, stages[s]->ParamFloats());
  const bool per_microbatch_policy = staleness == Staleness::kPipeDream || staleness == Staleness::kPipeMare;
  for (int t = 0; t < steps; ++t) {
    double loss_sum = 0;
    for (int k = 0; k < microbatches; ++k) {
      const int64_t g = int64_t{t} * microbatches + k;
      std::vector<int> read(n), back(n);
      for (int s = 0; s < n; ++s) {
        switch (staleness) {
          case Staleness::kFlush: read[s] = t; break;
          case Staleness::kTwoBW: read[s] = std::max(t - 1, 0); break;
          case Staleness::kPipeDream:
          case Staleness::kPipeMare:
            read[s] = static_cast<int>(std::max<int64_t>(0, g - (vertical_sync ? n : n - s) + 1));
            break;
        }
        back[s] = staleness == Staleness::kPipeMare ? static_cast<int>(g) : read[s];
      }
      const bool per_microbatch = staleness == Staleness::kPipeDream || staleness == Staleness::kPipeMare;
      loss_sum += microbatch(g, read, back, grads, per_microbatch || k == 0);
      if (per_microbatch) {
        for (int s = 0; s < n; ++s) update(s, grads[s], 1.0f);
      }
    }
    if (!per_microbatch_policy) {
      for (int s = 0; s < n; ++s) update(s, grads[s], 1.0f / static_cast<float>(microbatches));
    }
    result.losses.push_back(loss_sum / microbatches);
    for (int s = 0; s < n; ++s) {
      while (versions[s].size() > static_cast<size_t>(n + 2)) {  // older than any later read
        versions[s].pop_front();
        ++oldest[s];
      }
    }
  }
  for (int s = 0; s < n; ++s) {
    const exec::Buffer& w = versions[s].back();
    result.stage_params.emplace_back(w.data(), w.data() + w.size());
  }
  return result;
}

}  // namespace stagecraft::testing
