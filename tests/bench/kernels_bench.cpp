// Speed of the CPU backend's element-wise kernels (kernels/host.h) on one core, at the MLP
// shapes of the default scenario (64 x 512) and of the 8 x Linear(1024) case (64 x 1024).
// Reported as elements per second; compare with scripts/bench-vs-torch.sh's PyTorch numbers.
#include <benchmark/benchmark.h>

#include <vector>

#include "stagecraft/kernels/host.h"

namespace {

using namespace stagecraft::kernels;

std::vector<float> Ramp(int64_t n) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[i] = static_cast<float>((i * 37) % 1001) / 125.0f - 4.0f;  // [-4, 4]
  return v;
}

void SetElements(benchmark::State& state, int64_t n) {
  state.SetItemsProcessed(state.iterations() * n);
}

void BM_BiasGelu(benchmark::State& state) {
  const int rows = static_cast<int>(state.range(0)), cols = static_cast<int>(state.range(1));
  const std::vector<float> z0 = Ramp(int64_t{rows} * cols), bias = Ramp(cols);
  std::vector<float> z = z0, out(z0.size());
  for (auto _ : state) {
    z = z0;  // BiasGelu adds the bias in place
    BiasActivation(Activation::kGelu, rows, cols, z.data(), bias.data(), nullptr, out.data());
    benchmark::DoNotOptimize(out.data());
  }
  SetElements(state, int64_t{rows} * cols);
}
BENCHMARK(BM_BiasGelu)->Args({64, 512})->Args({64, 1024});

void BM_GeluBackward(benchmark::State& state) {
  const int64_t n = state.range(0) * state.range(1);
  const std::vector<float> z = Ramp(n), dout = Ramp(n);
  std::vector<float> dz(z.size());
  for (auto _ : state) {
    ActivationBackward(Activation::kGelu, n, dout.data(), z.data(), dz.data());
    benchmark::DoNotOptimize(dz.data());
  }
  SetElements(state, n);
}
BENCHMARK(BM_GeluBackward)->Args({64, 512})->Args({64, 1024});

void BM_BiasGrad(benchmark::State& state) {
  const int rows = static_cast<int>(state.range(0)), cols = static_cast<int>(state.range(1));
  const std::vector<float> dz = Ramp(int64_t{rows} * cols);
  std::vector<float> grad(cols, 0.0f);
  for (auto _ : state) {
    BiasGrad(rows, cols, dz.data(), grad.data(), true);
    benchmark::DoNotOptimize(grad.data());
  }
  SetElements(state, int64_t{rows} * cols);
}
BENCHMARK(BM_BiasGrad)->Args({64, 512})->Args({64, 1024});

void BM_Adam(benchmark::State& state) {
  const int64_t n = state.range(0);
  std::vector<float> g = Ramp(n);  // the update leaves it zeroed: every round after the first reads zeros
  std::vector<float> w = Ramp(n), m(n, 0.0f), v(n, 0.0f);
  AdamParams p;
  p.lr = 1e-3f;
  p.bias1 = 0.1f;
  p.bias2 = 0.001f;
  for (auto _ : state) {
    Adam(n, w.data(), w.data(), m.data(), v.data(), g.data(), 0.125f, p);
    benchmark::DoNotOptimize(w.data());
  }
  SetElements(state, n);
}
BENCHMARK(BM_Adam)->Arg(512 * 512 + 512);

}  // namespace

BENCHMARK_MAIN();
