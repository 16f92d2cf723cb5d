// One pipeline stage of the MLP (model.h): a contiguous range of layers and its forward,
// input-gradient and weight-gradient math on a Device. Knows nothing of schedules; the runtime
// decides when each piece runs and which weight version it reads.
#pragma once

#include <vector>

#include "stagecraft/exec/device.h"
#include "stagecraft/exec/model.h"

namespace stagecraft::exec {

struct StageShape {
  int first_layer = 0;
  int layers = 1;
  int hidden = 1;
  int rows = 1;  // microbatch size
  bool residual = false;
  kernels::Activation activation = kernels::Activation::kGelu;
};

// What a microbatch keeps between its F and its B (or I), and between I and W.
struct Activations {
  std::vector<Buffer> inputs;  // input of each layer; only inputs[0] when recomputing
  std::vector<Buffer> pre;     // pre-activation z of each layer (dropped by I)
  std::vector<Buffer> dz;      // gradient at z of each layer, made by I for W
  std::vector<Buffer> kept;    // the transformer's, in slots per piece of the stage (gpt_stage.cpp)
  int64_t Floats() const;
};

// Where a B or W puts the stage's weight gradients: added to what `data` holds when
// `accumulate`, written over it otherwise (the first microbatch of an update, so that the
// buffer needs no zeroing first).
struct GradTarget {
  float* data = nullptr;
  bool accumulate = true;
};

class StageModel {
 public:
  StageModel(Device& device, const StageShape& shape) : device_(device), shape_(shape) {}

  const StageShape& shape() const { return shape_; }
  // Parameters of the whole stage in one buffer: per layer W [h·h] then b [h].
  int64_t ParamFloats() const;
  int64_t ActivationFloats() const { return static_cast<int64_t>(shape_.rows) * shape_.hidden; }
  // Writes the initial parameters (model.h) into `params` (device memory).
  void InitParams(const MlpModel& model, float* params) const;

  // F: consumes the stage input, returns its output. With keep_all the inputs and
  // pre-activations of every layer are saved; without (recompute) only the stage input.
  Buffer Forward(const float* params, Buffer x, Activations* saved, bool keep_all);
  // Recompute: rebuilds what Forward(keep_all = true) would have saved from inputs[0].
  void Recompute(const float* params, Activations* saved);
  // B (grads.data != null: the weight gradients too) or I (grads.data == null: keep dz for W).
  // Consumes the gradient at the stage output, returns the gradient at the stage input.
  Buffer Backward(const float* params, Buffer dout, Activations* saved, GradTarget grads);
  // W: the weight gradients from what I saved, then drops it.
  void BackwardWeight(Activations* saved, GradTarget grads);

 private:
  int64_t LayerFloats() const { return static_cast<int64_t>(shape_.hidden) * shape_.hidden + shape_.hidden; }
  void LayerWeightGrad(int layer, const Buffer& dz, const Buffer& input, GradTarget grads);

  Device& device_;
  StageShape shape_;
};

}  // namespace stagecraft::exec
