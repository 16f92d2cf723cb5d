// The cpu device's W GEMM (dW = dzᵀ·x, exec/src/stage.cpp) writing over its output (beta = 0)
// against adding into it (beta = 1), with the caches swept before each run as a pipeline's
// other traffic leaves them: BLAS clears c in a pass of its own when beta is 0, which is why an
// update's backward adds into a gradient buffer its STEP left zeroed (docs/benchmarks.md).
#include <benchmark/benchmark.h>

#include <vector>

#include "stagecraft/exec/cpu_device.h"
#include "stagecraft/exec/device.h"

namespace {

using namespace stagecraft::exec;

void BM_WeightGradientGemm(benchmark::State& state) {
  const int hidden = static_cast<int>(state.range(0));
  const float beta = static_cast<float>(state.range(1));
  constexpr int kRows = 64;
  auto device = MakeCpuDevice();
  Buffer dz(*device, int64_t{kRows} * hidden), x(*device, int64_t{kRows} * hidden);
  Buffer dw(*device, int64_t{hidden} * hidden);
  device->memory().Fill(dz.data(), 0.25f, dz.size());
  device->memory().Fill(x.data(), 0.5f, x.size());
  device->memory().Fill(dw.data(), 0.0f, dw.size());
  std::vector<float> sweep(size_t{64} << 20 >> 2, 1.0f);  // 64 MiB: more than the caches hold
  float sink = 0;
  for (auto _ : state) {
    state.PauseTiming();
    for (size_t i = 0; i < sweep.size(); i += 16) sink += sweep[i]++;  // a line at a time
    benchmark::DoNotOptimize(sink);
    state.ResumeTiming();
    device->ops().linear.gemm(device->op_context(), true, false, hidden, hidden, kRows, 1.0f, dz.data(), x.data(), beta,
                              dw.data());
    benchmark::DoNotOptimize(dw.data());
  }
}
BENCHMARK(BM_WeightGradientGemm)
    ->ArgNames({"hidden", "beta"})
    ->Args({512, 0})
    ->Args({512, 1})
    ->Args({1024, 0})
    ->Args({1024, 1})
    ->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
