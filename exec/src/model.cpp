// Deterministic initial weights and synthetic data (see model.h).
#include "stagecraft/exec/model.h"

#include <algorithm>
#include <cmath>

#include "stagecraft/base/split_mix.h"

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
  if (const auto& set = model.data) {
    for (int r = 0; r < rows; ++r) {
      std::copy_n(set->x.data() + set->RowOf(g, rows, r) * model.hidden, model.hidden,
                  x + static_cast<int64_t>(r) * model.hidden);
    }
    return;
  }
  for (int64_t i = 0; i < n; ++i) x[i] = UniformAt(model.seed, kInputStream, g * n + i);
}

}  // namespace stagecraft::exec
