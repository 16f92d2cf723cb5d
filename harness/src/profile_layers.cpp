// ProfileLayers: per-layer timings and sizes of the executor's model, and their median over
// ranks (see profile_layers.h).
#include "stagecraft/harness/profile_layers.h"

#include <algorithm>
#include <memory>
#include <cstring>
#include <type_traits>

#include "stagecraft/base/check.h"
#include "stagecraft/base/stats.h"

#include "stagecraft/exec/model.h"
#include "stagecraft/exec/optimizer.h"
#include "stagecraft/exec/runtime.h"
#include "stagecraft/exec/stage.h"
#include "stagecraft/exec/weight_store.h"

namespace stagecraft::harness {

using namespace stagecraft::exec;  // the executor's types, throughout


namespace {

// Times `fn` on the device (queued work finished before and after). With `workspace`, also
// raises it to what fn held at its most beyond the larger of what was held before and after.
template <typename Fn>
int64_t Timed(Device& device, Fn fn, int64_t* workspace = nullptr) {
  const int64_t before = device.memory().bytes_in_use();
  device.memory().ResetPeak();
  device.streams().Synchronize();
  const int64_t start = device.clock().NowNs();
  fn();
  device.streams().Synchronize();
  const int64_t ns = device.clock().NowNs() - start;
  if (workspace != nullptr) {
    *workspace = std::max(*workspace, device.memory().peak_bytes() - std::max(before, device.memory().bytes_in_use()));
  }
  return ns;
}

// One layer of the model with what its ops touch: weights, gradients, optimizer state.
struct LayerRig {
  LayerRig(const TrainingConfig& tiny_steps, Device& device, std::unique_ptr<StageModel> stage)
      : model(std::move(stage)),
        params(device, model->ParamFloats()),
        grads(device, model->ParamFloats()),
        velocity(device, model->ParamFloats()),
        optimizer(device, tiny_steps, model->ParamFloats()) {
    model->InitParams(params.data());
    device.memory().Fill(grads.data(), 0.0f, grads.size());
    device.memory().Fill(velocity.data(), 0.0f, velocity.size());
  }
  std::unique_ptr<StageModel> model;
  Buffer params, grads, velocity;
  Optimizer optimizer;
  Activations saved;
  // Timings of the measured rounds (o: a STEP out of place; c, v: PipeMare's correction and
  // velocity update, the weight store's BLAS calls).
  std::vector<int64_t> f, i, w, s, o, c, v;
};

}  // namespace

namespace {

// Times one group of layers (rigs for consecutive layers, in order, whose first takes host_x)
// the way a rank holding them runs them, filling out[0 .. rigs.size()).
void ProfileGroup(const std::vector<std::unique_ptr<LayerRig>>& rigs, int repeats, int warmup,
                  const std::vector<float>& host_x, Device& device, sim::LayerProfile* out) {
  for (int round = 0; round < warmup + repeats; ++round) {
    const bool measured = round >= warmup;
    Buffer x(device, static_cast<int64_t>(host_x.size()));
    device.memory().Upload(x.data(), host_x.data(), x.size());
    for (size_t l = 0; l < rigs.size(); ++l) {
      LayerRig& r = *rigs[l];
      const int64_t t = Timed(
          device, [&] { x = r.model->Forward(r.params.data(), std::move(x), &r.saved, true); }, &out[l].workspace_bytes);
      out[l].activation_bytes = r.saved.Floats() * static_cast<int64_t>(sizeof(float));
      if (measured) r.f.push_back(t);
    }
    for (size_t l = rigs.size(); l-- > 0;) {  // the output stands in for its gradient
      LayerRig& r = *rigs[l];
      const int64_t t = Timed(
          device, [&] { x = r.model->Backward(r.params.data(), std::move(x), &r.saved, {}); }, &out[l].workspace_bytes);
      out[l].w_stash_bytes = r.saved.Floats() * static_cast<int64_t>(sizeof(float));
      if (measured) r.i.push_back(t);
    }
    // As a rank runs them: every layer's W, then the update of every layer, so a STEP finds
    // its gradients and optimizer state where the stage's backward left them, not hot from
    // its own layer's W.
    for (size_t l = 0; l < rigs.size(); ++l) {
      LayerRig& r = *rigs[l];
      const int64_t tw = Timed(
          device, [&] { r.model->BackwardWeight(&r.saved, {r.grads.data(), true}); }, &out[l].workspace_bytes);
      if (measured) r.w.push_back(tw);
    }
    // One update per round, as a rank makes one per backward at most: in place in even rounds,
    // out of place (a STEP that keeps the old version writes the new one into a buffer of its
    // own, runtime.cpp) in odd ones. Timed right after an update in place of the same state,
    // the update out of place found it in the caches and cost less than it does in a run.
    const bool in_place = round % 2 == 0;
    for (auto& rig : rigs) {
      LayerRig& r = *rig;
      const int64_t t = Timed(device, [&] {
        if (in_place) {
          r.optimizer.Step(r.params.data(), r.params.data(), r.grads.data(), 1.0f, r.optimizer.base_lr());
        } else {
          Buffer next(device, r.params.size());
          r.optimizer.Step(r.params.data(), next.data(), r.grads.data(), 1.0f, r.optimizer.base_lr());
        }
      });
      if (measured) (in_place ? r.s : r.o).push_back(t);
    }
    // PipeMare's correction as the weight store runs it (weight_store.h): w −= c·δ and back
    // around a backward; the velocity's two halves around a STEP.
    for (auto& rig : rigs) {
      LayerRig& r = *rig;
      const int64_t n = r.params.size();
      const int64_t tc = Timed(device, [&] {
        MoveAlongVelocity(device, n, -1.0f, r.velocity.data(), r.params.data());
        MoveAlongVelocity(device, n, 1.0f, r.velocity.data(), r.params.data());
      });
      const int64_t tv = Timed(device, [&] {
        VelocityBeforeStep(device, n, 0.9f, r.params.data(), r.velocity.data());
        VelocityAfterStep(device, n, 0.9f, r.params.data(), r.velocity.data());
      });
      if (measured) r.c.push_back(tc), r.v.push_back(tv);
    }
  }
  for (size_t l = 0; l < rigs.size(); ++l) {
    const LayerRig& r = *rigs[l];
    sim::LayerProfile& m = out[l];
    m.weight_bytes = r.model->ParamFloats() * static_cast<int64_t>(sizeof(float));
    m.grad_bytes = m.weight_bytes;
    m.optimizer_bytes = r.optimizer.StateBytes();
    m.forward_ns = Median(r.f);
    m.backward_input_ns = Median(r.i);
    m.backward_weight_ns = Median(r.w);
    m.step_ns = Median(r.s);
    m.version_copy_ns = std::max<int64_t>(0, Median(r.o) - m.step_ns);  // what keeping the old version adds
    m.correction_ns = Median(r.c);
    m.velocity_ns = Median(r.v);
  }
}

// What the first and last stages do per forward beyond their layers: copying the input
// microbatch into a buffer of its own, and the loss with its gradient.
void ProfileEnds(const TrainingConfig& config, Device& device, int repeats, int warmup, sim::Profile* p) {
  const int64_t input_floats = InputFloats(config);
  const LossShape loss_shape = LossShapeFor(config);
  const int64_t output_floats = int64_t{loss_shape.rows} * loss_shape.cols;
  std::vector<float> host_y(static_cast<size_t>(output_floats));
  for (int64_t i = 0; i < output_floats; ++i) host_y[i] = UniformAt(config.model.seed, kInputStream, i);
  Buffer input(device, input_floats), x(device, input_floats), y(device, output_floats), dy(device, output_floats),
      targets(device, loss_shape.target_floats), loss(device, 1);
  device.memory().Fill(input.data(), 0.0f, input_floats);
  device.memory().Upload(y.data(), host_y.data(), output_floats);
  device.memory().Fill(targets.data(), 0.0f, loss_shape.target_floats);  // class 0 is a valid label
  std::vector<int64_t> copies, losses;
  for (int round = 0; round < warmup + repeats; ++round) {
    const int64_t tc = Timed(device, [&] { device.memory().Copy(x.data(), input.data(), input_floats); });
    const int64_t tl = Timed(device, [&] {
      device.ops().loss.forward(device.op_context(), loss_shape.kind, loss_shape.rows, loss_shape.cols, y.data(),
                                targets.data(), dy.data(), loss.data(), 1.0f);
    });
    if (round >= warmup) {
      copies.push_back(tc);
      losses.push_back(tl);
    }
  }
  p->input_copy_ns = Median(copies);
  p->loss_ns = Median(losses);
}

}  // namespace

sim::Profile ProfileLayers(const TrainingConfig& config, Device& device, int repeats, int warmup,
                           int layers_per_group) {
  SC_CHECK(layers_per_group >= 1, "a group has a layer");
  // A small learning rate keeps the weights (and so the timings) where they started.
  TrainingConfig tiny_steps = config;
  tiny_steps.lr = 1e-6f;
  sim::Profile p;
  p.microbatch_size = config.microbatch_size;
  // What a stage boundary sends: one microbatch's activations.
  p.send_bytes = BoundaryFloats(config) * static_cast<int64_t>(sizeof(float));
  const int layers = NetworkLayers(config);
  p.layers.resize(static_cast<size_t>(layers));
  std::vector<float> host_x(static_cast<size_t>(BoundaryFloats(config)));
  for (size_t i = 0; i < host_x.size(); ++i) host_x[i] = UniformAt(config.model.seed, kInputStream, i);
  ProfileEnds(config, device, repeats, warmup, &p);
  for (int first = 0; first < layers; first += layers_per_group) {
    std::vector<std::unique_ptr<LayerRig>> rigs;
    for (int l = first; l < std::min(first + layers_per_group, layers); ++l) {
      rigs.push_back(std::make_unique<LayerRig>(tiny_steps, device, MakeStage(device, config, l, 1, false, false)));
    }
    ProfileGroup(rigs, repeats, warmup, host_x, device, p.layers.data() + first);
  }
  if (config.gpt) {
    // The embeddings take token ids (class 0 .. vocab − 1; zeros will do), the head the
    // residual stream; each is timed like a layer on its own.
    std::vector<std::unique_ptr<LayerRig>> embedding, head;
    embedding.push_back(std::make_unique<LayerRig>(tiny_steps, device, MakeStage(device, config, 0, 0, true, false)));
    ProfileGroup(embedding, repeats, warmup, std::vector<float>(static_cast<size_t>(InputFloats(config)), 0.0f), device,
                 &p.embedding.emplace());
    head.push_back(std::make_unique<LayerRig>(
        tiny_steps, device, MakeStage(device, config, config.gpt->layers, 0, false, true)));
    ProfileGroup(head, repeats, warmup, host_x, device, &p.head.emplace());
  }
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

}  // namespace stagecraft::harness
