// GPU benchmarks of the cuda backend, run wherever a GPU exists (without one every benchmark
// reports "no CUDA device" and measures nothing):
//   BM_LayerOpVsCublas/{F,I,W}/{tf32,bf16,fp32}: one layer's F, I and W as the executor runs
//     them (MlpStage on the cuda device: the GEMM with its element-wise work, and for bf16 the
//     rounding of the inputs) in scenarios/mlp-gpu.yaml's shape (256 rows, hidden 8192), timed
//     with CUDA events, next to a bare cublasGemmEx of the same GEMM in the same precision on
//     the same stream. Counter of_cublas = the layer op's GEMM rate / bare cuBLAS's (target
//     ≥ 0.6).
//   BM_RuntimeOverheadPerOp/{cuda,cpu}: RunRank on one rank with layers so small that the math
//     is negligible (hidden 16, 4 rows, 1F1B, 64 microbatches): wall time per op is the
//     runtime's own cost per op (target ≤ 10 µs on the cuda device).
//   taskset -c 0 build/tests/bench/cuda_bench
#include <benchmark/benchmark.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <chrono>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "stagecraft/exec/cpu_device.h"
#include "stagecraft/exec/cuda_device.h"
#include "stagecraft/exec/runtime.h"
#include "stagecraft/exec/stage.h"
#include "stagecraft/kernels/cuda_check.h"
#include "stagecraft/schedules/generators.h"
#include "stagecraft/schedules/lower.h"

namespace stagecraft::exec {
namespace {

constexpr int kRows = 256;     // scenarios/mlp-gpu.yaml: microbatch_size
constexpr int kHidden = 8192;  // model.mlp.hidden

#define SC_CUBLAS_BENCH_CHECK(call)                                                           \
  do {                                                                                        \
    if ((call) != CUBLAS_STATUS_SUCCESS) throw std::runtime_error(std::string("failed: ") + #call); \
  } while (0)

bool NoGpu(benchmark::State& state) {
  if (CudaDeviceCount() > 0) return false;
  state.SkipWithError("no CUDA device on this machine");
  for (auto _ : state) {
  }
  return true;
}

// Milliseconds of `work` on `stream`, between two events.
template <typename Work>
double TimeOnStream(cudaStream_t stream, Work&& work) {
  cudaEvent_t start = nullptr, stop = nullptr;
  SC_CUDA_CHECK(cudaEventCreate(&start));
  SC_CUDA_CHECK(cudaEventCreate(&stop));
  SC_CUDA_CHECK(cudaEventRecord(start, stream));
  work();
  SC_CUDA_CHECK(cudaEventRecord(stop, stream));
  SC_CUDA_CHECK(cudaEventSynchronize(stop));
  float ms = 0;
  SC_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
  SC_CUDA_CHECK(cudaEventDestroy(start));
  SC_CUDA_CHECK(cudaEventDestroy(stop));
  return ms;
}

// A bare cublasGemmEx of [kRows x kHidden] · [kHidden x kHidden] in `precision`, inputs already in
// its storage type: what cuBLAS itself reaches on this shape, in TFLOP/s.
double BareCublasTflops(cudaStream_t stream, GemmPrecision precision) {
  const bool half = precision == GemmPrecision::kBf16 || precision == GemmPrecision::kFp16;
  const cudaDataType_t in = precision == GemmPrecision::kBf16 ? CUDA_R_16BF
                            : precision == GemmPrecision::kFp16 ? CUDA_R_16F
                                                                : CUDA_R_32F;
  const cublasComputeType_t compute =
      precision == GemmPrecision::kTf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  const size_t element = half ? 2 : 4;
  void *a = nullptr, *b = nullptr, *c = nullptr;
  SC_CUDA_CHECK(cudaMalloc(&a, element * kRows * kHidden));
  SC_CUDA_CHECK(cudaMalloc(&b, element * kHidden * kHidden));
  SC_CUDA_CHECK(cudaMalloc(&c, sizeof(float) * kRows * kHidden));
  SC_CUDA_CHECK(cudaMemsetAsync(a, 0, element * kRows * kHidden, stream));
  SC_CUDA_CHECK(cudaMemsetAsync(b, 0, element * kHidden * kHidden, stream));
  cublasHandle_t blas = nullptr;
  SC_CUBLAS_BENCH_CHECK(cublasCreate(&blas));
  SC_CUBLAS_BENCH_CHECK(cublasSetStream(blas, stream));
  const float alpha = 1, beta = 0;
  auto gemm = [&] {
    SC_CUBLAS_BENCH_CHECK(cublasGemmEx(blas, CUBLAS_OP_N, CUBLAS_OP_N, kHidden, kRows, kHidden, &alpha, b, in, kHidden,
                                       a, in, kHidden, &beta, c, CUDA_R_32F, kHidden, compute, CUBLAS_GEMM_DEFAULT));
  };
  for (int i = 0; i < 5; ++i) gemm();
  const int reps = 50;
  const double ms = TimeOnStream(stream, [&] {
    for (int i = 0; i < reps; ++i) gemm();
  });
  (void)cublasDestroy(blas);
  (void)cudaFree(a);
  (void)cudaFree(b);
  (void)cudaFree(c);
  return 2.0 * kRows * kHidden * kHidden * reps / (ms * 1e-3) / 1e12;
}

enum class LayerOp { kF, kI, kW };

void BM_LayerOpVsCublas(benchmark::State& state) {
  if (NoGpu(state)) return;
  const auto op = static_cast<LayerOp>(state.range(0));
  const auto precision = static_cast<GemmPrecision>(state.range(1));
  auto device = MakeCudaDevice(0, precision);
  auto stream = static_cast<cudaStream_t>(CudaComputeStream(*device));
  const double bare = BareCublasTflops(stream, precision);

  MlpStage stage(*device, StageShape{.first_layer = 0, .layers = 1, .hidden = kHidden, .rows = kRows});
  Buffer params(*device, stage.ParamFloats());
  stage.InitParams(MlpModel{.layers = 1, .hidden = kHidden}, params.data());
  Buffer grads(*device, stage.ParamFloats());
  Buffer x(*device, stage.ActivationFloats());
  device->Fill(x.data(), 0.25f, stage.ActivationFloats());
  // One F → I → W round with only `op` between the events; returns its milliseconds.
  auto round = [&]() {
    Activations saved;
    Buffer in(*device, stage.ActivationFloats());
    device->Copy(in.data(), x.data(), stage.ActivationFloats());
    double ms = 0;
    Buffer y;
    auto forward = [&] { y = stage.Forward(params.data(), std::move(in), &saved, true); };
    if (op == LayerOp::kF) ms = TimeOnStream(stream, forward); else forward();
    Buffer dy = std::move(y);  // any gradient of the right shape
    Buffer dx;
    auto input_grad = [&] { dx = stage.Backward(params.data(), std::move(dy), &saved, GradTarget{nullptr, false}); };
    if (op == LayerOp::kI) ms = TimeOnStream(stream, input_grad); else input_grad();
    auto weight_grad = [&] { stage.BackwardWeight(&saved, GradTarget{grads.data(), false}); };
    if (op == LayerOp::kW) ms = TimeOnStream(stream, weight_grad); else weight_grad();
    return ms;
  };
  for (int i = 0; i < 3; ++i) round();  // warm the pool and cuBLAS's heuristics
  double total_ms = 0;
  int64_t rounds = 0;
  for (auto _ : state) {
    const double ms = round();
    state.SetIterationTime(ms * 1e-3);
    total_ms += ms;
    ++rounds;
  }
  const double ours = 2.0 * kRows * kHidden * kHidden * static_cast<double>(rounds) / (total_ms * 1e-3) / 1e12;
  state.counters["TFLOPS"] = ours;
  state.counters["cublas_TFLOPS"] = bare;
  state.counters["of_cublas"] = ours / bare;
  state.SetLabel(device->Name());
}
BENCHMARK(BM_LayerOpVsCublas)
    ->ArgNames({"op", "precision"})
    ->ArgsProduct({{static_cast<int>(LayerOp::kF), static_cast<int>(LayerOp::kI), static_cast<int>(LayerOp::kW)},
                   {static_cast<int>(GemmPrecision::kTf32), static_cast<int>(GemmPrecision::kBf16),
                    static_cast<int>(GemmPrecision::kFp32)}})
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

// A transport for a one-rank run: no peers, so no transfers.
class OneRankTransport final : public Transport {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string Name() const override { return "none"; }
  Request Isend(const float*, int64_t, int, int64_t) override { throw std::logic_error("one rank sends nothing"); }
  Request Irecv(float*, int64_t, int, int64_t) override { throw std::logic_error("one rank receives nothing"); }
  bool Test(Request) override { return true; }
  void Wait(Request) override {}
  void Barrier() override {}
  bool EveryRank(bool mine) override { return mine; }
  std::vector<std::string> Gather(const std::string& mine, int) override { return {mine}; }
  void Broadcast(std::string*, int) override {}
  [[noreturn]] void Abort(int exit_code) override { std::exit(exit_code); }
};

void BM_RuntimeOverheadPerOp(benchmark::State& state) {
  const bool cuda = state.range(0) != 0;
  if (cuda && NoGpu(state)) return;
  auto device = cuda ? MakeCudaDevice(0, GemmPrecision::kFp32) : MakeCpuDevice();
  schedules::GeneratorParams p;
  p.ranks = 1;
  p.microbatches = 64;
  p.steps = 2;
  const schedules::Schedule s = schedules::Lower(schedules::Generate("1f1b", p));
  TrainingConfig config;
  config.model = MlpModel{.layers = 1, .hidden = 16};
  config.microbatch_size = 4;
  config.layers_per_stage = {1};
  const Dataset data = MakeDataset(*device, config, 64 * 2, true, true);
  OneRankTransport transport;
  const double ops = static_cast<double>(s.ops[0].size());
  RunRank(s, config, data, *device, transport);  // warm
  double total = 0;
  for (auto _ : state) {
    const auto start = std::chrono::steady_clock::now();
    RunRank(s, config, data, *device, transport);
    device->Synchronize();
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    state.SetIterationTime(seconds);
    total += seconds;
  }
  state.counters["us_per_op"] = total * 1e6 / (ops * static_cast<double>(state.iterations()));
  state.SetLabel(device->Name());
}
BENCHMARK(BM_RuntimeOverheadPerOp)->ArgName("cuda")->Arg(1)->Arg(0)->UseManualTime()->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace stagecraft::exec

BENCHMARK_MAIN();
