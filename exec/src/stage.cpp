// MlpStage: the MLP stage's math (see stage.h). Per layer, with x [rows x h] and W [h x h]:
//   forward   z = x Wᵀ + b;  out = act(z) (+ x)        act: GELU or ReLU
//   input     dz = dout · act'(z);  dx = dz W (+ dout)
//   weight    dW += dzᵀ x;  db += Σ_rows dz
#include "stagecraft/exec/stage.h"

#include <vector>

#include "stagecraft/base/check.h"
#include "stagecraft/schedules/ir.h"

namespace stagecraft::exec {

int64_t Activations::Floats() const {
  int64_t n = 0;
  for (const auto* list : {&inputs, &pre, &dz, &kept}) {
    for (const Buffer& b : *list) n += b.size();
  }
  return n;
}

int64_t MlpStage::ParamFloats() const { return shape_.layers * LayerFloats(); }

void MlpStage::InitParams(const MlpModel& model, float* params) const {
  const int h = shape_.hidden;
  std::vector<float> host(static_cast<size_t>(ParamFloats()));
  for (int l = 0; l < shape_.layers; ++l) {
    float* w = host.data() + l * LayerFloats();
    InitLayer(model, shape_.first_layer + l, w, w + static_cast<int64_t>(h) * h);
  }
  device_.memory().Upload(params, host.data(), ParamFloats());
}

Buffer MlpStage::Forward(const float* params, Buffer x, Activations* saved, bool keep_all) {
  const int h = shape_.hidden;
  const int rows = shape_.rows;
  SC_CHECK(x.size() == ActivationFloats(), "stage input has the microbatch's shape");
  saved->inputs.clear();
  saved->pre.clear();
  saved->dz.clear();
  for (int l = 0; l < shape_.layers; ++l) {
    const float* w = params + l * LayerFloats();
    Buffer z(device_, ActivationFloats());
    Buffer out(device_, ActivationFloats());
    ops_.fused_linear.forward(cx_, shape_.activation, rows, h, h, x.data(), w, w + static_cast<int64_t>(h) * h,
                              shape_.residual ? x.data() : nullptr, z.data(), out.data());
    if (keep_all || l == 0) saved->inputs.push_back(std::move(x));
    if (keep_all) saved->pre.push_back(std::move(z));
    x = std::move(out);
  }
  return x;
}

void StageModel::Recompute(const float* params, Activations* saved) {
  SC_CHECK(saved->inputs.size() == 1 && saved->pre.empty() && saved->kept.empty(),
           "recompute starts from the stage input alone");
  Buffer x(device_, saved->inputs[0].size());
  device_.memory().Copy(x.data(), saved->inputs[0].data(), x.size());
  Forward(params, std::move(x), saved, true);
}

Buffer MlpStage::Backward(const float* params, Buffer dout, Activations* saved, GradTarget grads) {
  const int h = shape_.hidden;
  const int rows = shape_.rows;
  SC_CHECK(static_cast<int>(saved->pre.size()) == shape_.layers, "backward needs the forward's activations");
  if (grads.data == nullptr) saved->dz.resize(shape_.layers);
  // Without a residual, layer l's input gradient and the activation's derivative before it are
  // one op (fused_linear.input_grad: dz of layer l - 1 = act'(pre[l - 1]) ⊙ dz · w); with one,
  // the gradient reaching layer l - 1 adds the residual's before that derivative.
  Buffer dz(device_, ActivationFloats());
  ops_.bias_activation.backward(cx_, shape_.activation, dz.size(), dout.data(), saved->pre.back().data(), dz.data());
  for (int l = shape_.layers - 1; l >= 0; --l) {
    const float* w = params + l * LayerFloats();
    saved->pre[l].Reset();
    Buffer next(device_, ActivationFloats());  // dz of layer l - 1, or the stage's input gradient
    if (l > 0 && !shape_.residual) {
      ops_.fused_linear.input_grad(cx_, shape_.activation, rows, h, h, dz.data(), w, saved->pre[l - 1].data(),
                                   next.data());
    } else {
      ops_.linear.gemm(cx_, false, false, rows, h, h, 1.0f, dz.data(), w, 0.0f, next.data());
      if (shape_.residual) ops_.linear.axpy(cx_, next.size(), 1.0f, dout.data(), next.data());
      if (l > 0) {
        Buffer below(device_, ActivationFloats());
        ops_.bias_activation.backward(cx_, shape_.activation, below.size(), next.data(), saved->pre[l - 1].data(),
                                      below.data());
        dout = std::move(next);  // the gradient of layer l - 1's output: the next residual's
        next = std::move(below);
      }
    }
    if (grads.data != nullptr) {
      LayerWeightGrad(l, dz, saved->inputs[l], grads);
      saved->inputs[l].Reset();
    } else {
      saved->dz[l] = std::move(dz);
    }
    dz = std::move(next);
  }
  saved->pre.clear();
  if (grads.data != nullptr) saved->inputs.clear();
  return dz;
}

void MlpStage::BackwardWeight(Activations* saved, GradTarget grads) {
  SC_CHECK(static_cast<int>(saved->dz.size()) == shape_.layers, "W needs the dz its I kept");
  for (int l = 0; l < shape_.layers; ++l) LayerWeightGrad(l, saved->dz[l], saved->inputs[l], grads);
  saved->inputs.clear();
  saved->dz.clear();
}

void MlpStage::LayerWeightGrad(int layer, const Buffer& dz, const Buffer& input, GradTarget grads) {
  const int h = shape_.hidden;
  float* gw = grads.data + layer * LayerFloats();
  ops_.fused_linear.weight_grad(cx_, shape_.rows, h, h, dz.data(), input.data(), gw, gw + static_cast<int64_t>(h) * h,
                                grads.accumulate);
}

}  // namespace stagecraft::exec
