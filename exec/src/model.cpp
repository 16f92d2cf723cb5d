// Deterministic initial weights and synthetic data (see model.h).
#include "stagecraft/exec/model.h"

#include <cmath>

#include "stagecraft/base/split_mix.h"
#include "stagecraft/kernels/activation.h"

namespace stagecraft::exec {

float UniformAt(uint64_t seed, uint64_t stream, uint64_t index) {
  const uint64_t bits = SplitMix64(SplitMix64(SplitMix64(seed) ^ stream) ^ index);
  // The top 24 bits as a fraction in [0, 1), exact in float.
  const float unit = static_cast<float>(bits >> 40) * (1.0f / 16777216.0f);
  return 2.0f * unit - 1.0f;
}

void InitLayer(const MlpModel& model, int layer, float* weight, float* bias) {
  const int h = model.hidden;
  const float scale = std::sqrt(6.0f / static_cast<float>(h));
  for (int64_t i = 0; i < static_cast<int64_t>(h) * h; ++i) {
    weight[i] = scale * UniformAt(model.seed, kWeightStream + layer, i);
  }
  for (int o = 0; o < h; ++o) bias[o] = 0.0f;
}

void MicrobatchInput(const MlpModel& model, int rows, int64_t g, float* x) {
  const int64_t n = static_cast<int64_t>(rows) * model.hidden;
  for (int64_t i = 0; i < n; ++i) x[i] = UniformAt(model.seed, kInputStream, g * n + i);
}

void MicrobatchTarget(const MlpModel& model, int rows, int64_t g, float* targets) {
  MicrobatchTargets(model, rows, g, 1, targets);
}

void MicrobatchTargets(const MlpModel& model, int rows, int64_t first, int64_t count, float* targets,
                       const std::function<void()>& after_each) {
  const int h = model.hidden;
  // The teacher's weights transposed, wt[i][o] = W_t[o][i], so the inner loop runs over
  // contiguous outputs and vectorizes.
  const float scale = 2.0f * std::sqrt(3.0f / static_cast<float>(h));
  std::vector<float> wt(static_cast<size_t>(h) * h), b(h);
  for (int o = 0; o < h; ++o) {
    for (int i = 0; i < h; ++i) {
      wt[static_cast<size_t>(i) * h + o] = scale * UniformAt(model.seed, kTeacherStream, static_cast<uint64_t>(o) * h + i);
    }
    b[o] = 0.1f * UniformAt(model.seed, kTeacherStream + 1, o);
  }
  std::vector<float> x(static_cast<size_t>(rows) * h), y(h);
  const int64_t per = TargetFloats(model, rows);
  for (int64_t k = 0; k < count; ++k) {
    MicrobatchInput(model, rows, first + k, x.data());
    float* out = targets + k * per;
    for (int r = 0; r < rows; ++r) {
      const float* xr = x.data() + static_cast<int64_t>(r) * h;
      for (int o = 0; o < h; ++o) y[o] = b[o];
      for (int i = 0; i < h; ++i) {
        const float* wi = wt.data() + static_cast<int64_t>(i) * h;
        for (int o = 0; o < h; ++o) y[o] += wi[o] * xr[i];
      }
      for (int o = 0; o < h; ++o) y[o] = kernels::Gelu(y[o]);
      if (model.loss == kernels::LossKind::kMse) {
        for (int o = 0; o < h; ++o) out[static_cast<int64_t>(r) * h + o] = y[o];
      } else {
        int best = 0;
        for (int o = 1; o < h; ++o) best = y[o] > y[best] ? o : best;
        out[r] = static_cast<float>(best);
      }
    }
    if (after_each) after_each();
  }
}

}  // namespace stagecraft::exec
