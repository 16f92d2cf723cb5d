// One pipeline stage of the executor's network; the MLP (model.h): a contiguous range of layers and its forward,
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
// `accumulate`, written over it otherwise. The runtime always adds, into buffers that the STEP
// before left zeroed (kernels/host.h: an update consumes its gradient); writing over would
// cost a GEMM an extra pass over its output (BLAS scales c by beta = 0 before it adds).
struct GradTarget {
  float* data = nullptr;
  bool accumulate = true;
};

// A pipeline stage of the executor's network, as the runtime drives it: the MLP (MlpStage,
// below) or the transformer (GptStage, gpt.h). Parameters live in one device buffer.
class StageModel {
 public:
  virtual ~StageModel() = default;
  virtual int64_t ParamFloats() const = 0;
  // Writes the initial parameters (from the seed alone) into `params` (device memory).
  virtual void InitParams(float* params) const = 0;
  // What F consumes and produces per microbatch (floats).
  virtual int64_t InputFloats() const = 0;
  virtual int64_t OutputFloats() const = 0;
  // F: consumes the stage input, returns its output. With keep_all everything the backward
  // needs is saved; without (recompute) only the stage input, in inputs[0].
  virtual Buffer Forward(const float* params, Buffer x, Activations* saved, bool keep_all) = 0;
  // Recompute: rebuilds what Forward(keep_all = true) would have saved from inputs[0].
  void Recompute(const float* params, Activations* saved);
  // B (grads.data != null: the weight gradients too) or I (grads.data == null: keep what W
  // needs). Consumes the gradient at the stage output, returns the gradient at the stage input
  // (empty when the stage input has none: the transformer's tokens).
  virtual Buffer Backward(const float* params, Buffer dout, Activations* saved, GradTarget grads) = 0;
  // W: the weight gradients from what I saved, then drops it.
  virtual void BackwardWeight(Activations* saved, GradTarget grads) = 0;

 protected:
  explicit StageModel(Device& device) : device_(device), ops_(device.ops()), cx_(device.op_context()) {}
  Device& device_;
  const LayerOps& ops_;  // the device's layer ops, run with cx_
  OpContext& cx_;
};

class MlpStage final : public StageModel {
 public:
  MlpStage(Device& device, const StageShape& shape, const MlpModel& model = {})
      : StageModel(device), shape_(shape), model_(model) {}

  const StageShape& shape() const { return shape_; }
  // Parameters of the whole stage in one buffer: per layer W [h·h] then b [h].
  int64_t ParamFloats() const override;
  void InitParams(float* params) const override { InitParams(model_, params); }
  // The initial parameters of `model`'s layers (model.h) into `params` (device memory).
  void InitParams(const MlpModel& model, float* params) const;
  int64_t ActivationFloats() const { return static_cast<int64_t>(shape_.rows) * shape_.hidden; }
  int64_t InputFloats() const override { return ActivationFloats(); }
  int64_t OutputFloats() const override { return ActivationFloats(); }

  Buffer Forward(const float* params, Buffer x, Activations* saved, bool keep_all) override;
  Buffer Backward(const float* params, Buffer dout, Activations* saved, GradTarget grads) override;
  void BackwardWeight(Activations* saved, GradTarget grads) override;

 private:
  int64_t LayerFloats() const { return static_cast<int64_t>(shape_.hidden) * shape_.hidden + shape_.hidden; }
  void LayerWeightGrad(int layer, const Buffer& dz, const Buffer& input, GradTarget grads);

  StageShape shape_;
  MlpModel model_;
};

}  // namespace stagecraft::exec
