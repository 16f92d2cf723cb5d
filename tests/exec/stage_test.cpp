// exec/stage.cpp on the cpu device: a stage's forward and gradients equal a naive double
// computation of the same layers, and B equals I followed by W; recompute rebuilds exactly
// what the forward kept.
#include "stagecraft/exec/stage.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <memory>

#include "stagecraft/exec/cpu_device.h"

namespace stagecraft::exec {
namespace {

struct StageCase {
  explicit StageCase(bool residual = true)
      : model{.layers = 3, .hidden = 6, .residual = residual, .seed = 4},
        shape{.first_layer = 0, .layers = 3, .hidden = 6, .rows = 5, .residual = residual} {}
  MlpModel model;
  StageShape shape;
};

// A stage of StageCase on a cpu device with its initial parameters.
struct InitializedStage {
  explicit InitializedStage(bool residual = true) : s(residual) { stage.InitParams(s.model, params.data()); }
  StageCase s;
  std::unique_ptr<Device> device = MakeCpuDevice();
  MlpStage stage{*device, s.shape};
  Buffer params{*device, stage.ParamFloats()};
};

std::vector<float> Download(Device& d, const Buffer& b) {
  std::vector<float> host(b.size());
  d.memory().Download(host.data(), b.data(), b.size());
  return host;
}

// Loss L = Σ y ⊙ c for fixed c, so dL/dy = c and the reference's chain rule can be compared;
// with each layer's residual and without (where a layer's input gradient and the activation's
// derivative before it are one op, fused_linear.input_grad).
void ExpectForwardAndGradientsMatchNaiveDouble(bool residual) {
  InitializedStage t(residual);
  Device* device = t.device.get();
  MlpStage& stage = t.stage;
  Buffer& params = t.params;
  const std::vector<float> p = Download(*device, params);
  std::vector<float> x(30), c(30);
  for (int i = 0; i < 30; ++i) {
    x[i] = UniformAt(1, 1, i);
    c[i] = UniformAt(1, 2, i);
  }
  // Naive double forward, keeping what the backward needs.
  const int h = 6, rows = 5, lf = h * h + h;
  std::vector<std::vector<double>> in(4, std::vector<double>(30)), z(3, std::vector<double>(30));
  for (int i = 0; i < 30; ++i) in[0][i] = x[i];
  auto gelu = [](double v) { return 0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v))); };
  for (int l = 0; l < 3; ++l) {
    for (int r = 0; r < rows; ++r) {
      for (int o = 0; o < h; ++o) {
        double v = p[l * lf + h * h + o];
        for (int i = 0; i < h; ++i) v += p[l * lf + o * h + i] * in[l][r * h + i];
        z[l][r * h + o] = v;
        in[l + 1][r * h + o] = gelu(v) + (residual ? in[l][r * h + o] : 0.0);
      }
    }
  }
  Buffer xb(*device, 30);
  device->memory().Upload(xb.data(), x.data(), 30);
  Activations saved;
  const std::vector<float> y = Download(*device, stage.Forward(params.data(), std::move(xb), &saved, true));
  for (int i = 0; i < 30; ++i) EXPECT_NEAR(y[i], in[3][i], 1e-5 * (1 + std::abs(in[3][i])));

  // Gradient check of dL/dx and dL/dW by central differences of the double forward.
  auto loss_at = [&](std::vector<float> pp, std::vector<double> xx) {
    std::vector<double> a = xx;
    for (int l = 0; l < 3; ++l) {
      std::vector<double> next(30);
      for (int r = 0; r < rows; ++r)
        for (int o = 0; o < h; ++o) {
          double v = pp[l * lf + h * h + o];
          for (int i = 0; i < h; ++i) v += pp[l * lf + o * h + i] * a[r * h + i];
          next[r * h + o] = gelu(v) + (residual ? a[r * h + o] : 0.0);
        }
      a = next;
    }
    double L = 0;
    for (int i = 0; i < 30; ++i) L += a[i] * c[i];
    return L;
  };
  Buffer dy(*device, 30), grads(*device, stage.ParamFloats());
  device->memory().Upload(dy.data(), c.data(), 30);
  device->memory().Fill(grads.data(), 0.0f, grads.size());
  const std::vector<float> dx = Download(*device, stage.Backward(params.data(), std::move(dy), &saved, {grads.data(), true}));
  const std::vector<float> g = Download(*device, grads);
  const double eps = 1e-3;
  for (int i = 0; i < 30; i += 7) {
    std::vector<double> xp(in[0]), xm(in[0]);
    xp[i] += eps;
    xm[i] -= eps;
    EXPECT_NEAR(dx[i], (loss_at(p, xp) - loss_at(p, xm)) / (2 * eps), 2e-3);
  }
  for (int k : {0, 17, lf + 3, 2 * lf + h * h + 2}) {
    std::vector<float> pp(p), pm(p);
    pp[k] += eps;
    pm[k] -= eps;
    EXPECT_NEAR(g[k], (loss_at(pp, in[0]) - loss_at(pm, in[0])) / (2 * eps), 2e-3) << "param " << k;
  }
}

TEST(StageTest, ForwardAndGradientsMatchNaiveDouble) { ExpectForwardAndGradientsMatchNaiveDouble(true); }
TEST(StageTest, ForwardAndGradientsMatchNaiveDoubleWithoutResiduals) { ExpectForwardAndGradientsMatchNaiveDouble(false); }

// With residuals and without.
void ExpectBackwardEqualsInputThenWeightAndRecomputeMatches(bool residual) {
  InitializedStage t(residual);
  Device* device = t.device.get();
  MlpStage& stage = t.stage;
  Buffer& params = t.params;
  std::vector<float> x(30), c(30);
  for (int i = 0; i < 30; ++i) {
    x[i] = UniformAt(2, 1, i);
    c[i] = UniformAt(2, 2, i);
  }
  std::vector<std::vector<float>> dxs, gs;
  // 0: B; 1: I then W; 2: recompute then B, each adding onto zeroed gradients; 3: B and 4: I
  // then W writing over gradients that hold NaN (an update's first microbatch, a reused buffer).
  for (int mode = 0; mode < 5; ++mode) {
    Buffer xb(*device, 30), dy(*device, 30), grads(*device, stage.ParamFloats());
    device->memory().Upload(xb.data(), x.data(), 30);
    device->memory().Upload(dy.data(), c.data(), 30);
    const bool accumulate = mode < 3;
    device->memory().Fill(grads.data(), accumulate ? 0.0f : std::numeric_limits<float>::quiet_NaN(), grads.size());
    const bool split = mode == 1 || mode == 4;
    Activations saved;
    stage.Forward(params.data(), std::move(xb), &saved, mode != 2);
    if (mode == 2) {
      EXPECT_EQ(saved.Floats(), 30);  // only the stage input
      stage.Recompute(params.data(), &saved);
    }
    Buffer dx = stage.Backward(params.data(), std::move(dy), &saved,
                               split ? GradTarget{} : GradTarget{grads.data(), accumulate});
    if (split) {
      EXPECT_EQ(saved.Floats(), 2 * 3 * 30);  // inputs and dz of every layer until W
      stage.BackwardWeight(&saved, {grads.data(), accumulate});
    }
    EXPECT_EQ(saved.Floats(), 0);
    dxs.push_back(Download(*device, dx));
    gs.push_back(Download(*device, grads));
  }
  EXPECT_EQ(dxs[0], dxs[1]);
  EXPECT_EQ(gs[0], gs[1]);
  EXPECT_EQ(dxs[0], dxs[2]);
  EXPECT_EQ(gs[0], gs[2]);
  EXPECT_EQ(gs[0], gs[3]);
  EXPECT_EQ(gs[0], gs[4]);
}

TEST(StageTest, BackwardEqualsInputThenWeightAndRecomputeMatches) {
  ExpectBackwardEqualsInputThenWeightAndRecomputeMatches(true);
  ExpectBackwardEqualsInputThenWeightAndRecomputeMatches(false);
}

TEST(StageTest, DeviceTracksBytesInUse) {
  auto device = MakeCpuDevice();
  const int64_t before = device->memory().bytes_in_use();
  {
    Buffer a(*device, 100);
    Buffer b(*device, 50);
    EXPECT_EQ(device->memory().bytes_in_use() - before, 600);
    Buffer c = std::move(a);
    EXPECT_EQ(device->memory().bytes_in_use() - before, 600);
  }
  EXPECT_EQ(device->memory().bytes_in_use(), before);
  EXPECT_GE(device->memory().peak_bytes() - before, 600);
}

// Buffers come back to the device for reuse: once one microbatch has run, the next ones
// (forward, backward, split backward, recompute) take nothing new from the system.
TEST(StageTest, SteadyStateAllocatesNothing) {
  InitializedStage t;
  Device* device = t.device.get();
  MlpStage& stage = t.stage;
  Buffer& params = t.params;
  Buffer grads(*device, stage.ParamFloats());
  device->memory().Fill(grads.data(), 0.0f, grads.size());
  auto microbatch = [&](bool split) {
    Buffer x(*device, stage.ActivationFloats());
    device->memory().Fill(x.data(), 0.5f, x.size());
    Activations saved;
    Buffer y = stage.Forward(params.data(), std::move(x), &saved, true);
    Buffer dx = stage.Backward(params.data(), std::move(y), &saved, split ? GradTarget{} : GradTarget{grads.data(), true});
    if (split) stage.BackwardWeight(&saved, {grads.data(), true});
  };
  microbatch(false);
  microbatch(true);
  const int64_t warm = device->memory().system_allocations();
  EXPECT_GT(warm, 0);
  for (int i = 0; i < 5; ++i) microbatch(i % 2 == 1);
  EXPECT_EQ(device->memory().system_allocations(), warm);
  EXPECT_EQ(device->memory().bytes_in_use(), 2 * stage.ParamFloats() * static_cast<int64_t>(sizeof(float)));
}

}  // namespace
}  // namespace stagecraft::exec
