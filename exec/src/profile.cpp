// ProfileLayers: per-layer timings and sizes of the executor's model, and their median over
// ranks (see profile.h).
#include "stagecraft/exec/profile.h"

#include <algorithm>
#include <cstring>
#include <type_traits>

#include "stagecraft/base/check.h"

#include "stagecraft/exec/optimizer.h"
#include "stagecraft/exec/stage.h"

namespace stagecraft::exec {
namespace {

int64_t Median(std::vector<int64_t> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// Times `fn` on the device (queued work finished before and after).
template <typename Fn>
int64_t Timed(Device& device, Fn fn) {
  device.Synchronize();
  const int64_t start = device.NowNs();
  fn();
  device.Synchronize();
  return device.NowNs() - start;
}

sim::LayerProfile ProfileLayer(const TrainingConfig& config, Device& device, int layer, int repeats, int warmup) {
  StageShape shape;
  shape.first_layer = layer;
  shape.layers = 1;
  shape.hidden = config.model.hidden;
  shape.rows = config.microbatch_size;
  shape.residual = config.model.residual;
  StageModel model(device, shape);
  const int64_t n = model.ParamFloats();
  Buffer params(device, n), grads(device, n);
  model.InitParams(config.model, params.data());
  device.Fill(grads.data(), 0.0f, n);
  // A small learning rate keeps the weights (and so the timings) where they started.
  TrainingConfig tiny_steps = config;
  tiny_steps.lr = 1e-6f;
  Optimizer optimizer(device, tiny_steps, n);
  sim::LayerProfile m;
  m.weight_bytes = n * static_cast<int64_t>(sizeof(float));
  m.grad_bytes = m.weight_bytes;
  m.optimizer_bytes = optimizer.StateBytes();
  std::vector<float> host_x(static_cast<size_t>(model.ActivationFloats()));
  MicrobatchInput(config.model, shape.rows, 0, host_x.data());
  std::vector<int64_t> f, i, w, s;
  for (int round = 0; round < warmup + repeats; ++round) {
    Buffer x(device, model.ActivationFloats());
    device.Upload(x.data(), host_x.data(), x.size());
    Activations saved;
    Buffer y, dx;
    const int64_t tf = Timed(device, [&] { y = model.Forward(params.data(), std::move(x), &saved, true); });
    m.activation_bytes = saved.Floats() * static_cast<int64_t>(sizeof(float));
    const int64_t ti = Timed(device, [&] { dx = model.Backward(params.data(), std::move(y), &saved, nullptr); });
    m.w_stash_bytes = saved.Floats() * static_cast<int64_t>(sizeof(float));
    const int64_t tw = Timed(device, [&] { model.BackwardWeight(&saved, grads.data()); });
    const int64_t ts = Timed(device, [&] { optimizer.Step(params.data(), grads.data(), 1.0f); });
    if (round < warmup) continue;
    f.push_back(tf);
    i.push_back(ti);
    w.push_back(tw);
    s.push_back(ts);
  }
  m.forward_ns = Median(f);
  m.backward_input_ns = Median(i);
  m.backward_weight_ns = Median(w);
  m.step_ns = Median(s);
  return m;
}

}  // namespace

sim::Profile ProfileLayers(const TrainingConfig& config, Device& device, int repeats, int warmup) {
  sim::Profile p;
  p.microbatch_size = config.microbatch_size;
  // What a stage boundary sends: one layer's output, microbatch_size x hidden floats.
  p.send_bytes = int64_t{config.microbatch_size} * config.model.hidden * static_cast<int64_t>(sizeof(float));
  for (int l = 0; l < config.model.layers; ++l) p.layers.push_back(ProfileLayer(config, device, l, repeats, warmup));
  return p;
}

static_assert(std::is_trivially_copyable_v<sim::LayerProfile>, "layers travel as bytes");

std::string LayersToBytes(const std::vector<sim::LayerProfile>& layers) {
  std::string bytes(layers.size() * sizeof(sim::LayerProfile), '\0');
  std::memcpy(bytes.data(), layers.data(), bytes.size());
  return bytes;
}

std::vector<sim::LayerProfile> LayersFromBytes(const std::string& bytes) {
  SC_CHECK(bytes.size() % sizeof(sim::LayerProfile) == 0, "profile bytes are whole layers");
  std::vector<sim::LayerProfile> layers(bytes.size() / sizeof(sim::LayerProfile));
  std::memcpy(layers.data(), bytes.data(), bytes.size());
  return layers;
}

std::vector<sim::LayerProfile> MedianOverRanks(const std::vector<std::vector<sim::LayerProfile>>& per_rank) {
  SC_CHECK(!per_rank.empty(), "a median over at least one rank");
  std::vector<sim::LayerProfile> out = per_rank.front();
  for (size_t l = 0; l < out.size(); ++l) {
    for (int64_t sim::LayerProfile::*field : sim::kLayerProfileFields) {
      std::vector<int64_t> values;
      for (const auto& rank : per_rank) {
        SC_CHECK(rank.size() == out.size(), "every rank profiles the same layers");
        values.push_back(rank[l].*field);
      }
      out[l].*field = Median(std::move(values));
    }
  }
  return out;
}

}  // namespace stagecraft::exec
