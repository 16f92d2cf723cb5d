// GPU benchmarks of the cuda backend, run wherever a GPU exists (without one every benchmark
// reports "no CUDA device" and measures nothing):
//   BM_LayerOpVsCublas/{F,I,W}/{tf32,bf16,fp32}/stepped:{0,1}: one layer's F, I and W as the
//     executor runs them (MlpStage on the cuda device: the GEMM with its element-wise work, and
//     for bf16 the rounding of the inputs) in scenarios/mlp-gpu.yaml's shape (256 rows, hidden
//     8192), timed with CUDA events, next to a bare cublasGemmEx of the same GEMM (the op's own
//     shape and transposes: W's inner dimension is the 256 rows) in the same precision on the
//     same stream. stepped:1 runs an optimizer update (lr 0) on the weights first, as every step
//     after a run's first does: in bf16 the GEMMs then read the weights' 16-bit copy instead of
//     rounding 8192² weights at each call. Counter of_cublas = the layer op's GEMM rate / bare
//     cuBLAS's (target ≥ 0.9 in the steady state, stepped:1, issue 57 (it was 0.6 before the fused
//     linear layers); stepped:0 shows a first step's cost).
//   BM_RuntimeOverheadPerOp/{cuda,cpu}: RunRank on one rank with layers so small that the math
//     is negligible (hidden 16, 4 rows, 1F1B, 2 steps): the wall time a run of 96 microbatches
//     takes beyond one of 32, per op it adds (us_per_op: the ops' kernel launches included).
//     Beside it the same ops' math issued with no runtime around it (math_us_per_op: per
//     microbatch the input's copy, F, the loss, B with the weight gradients, per step the
//     optimizer's update, the same calls on the same device), timed the same way; their
//     difference, runtime_us_per_op, is what the runtime adds per op (its op clock's stamps, the
//     weight store, the bookkeeping). The target, ≤ 10 µs per op on the cuda device, is judged on
//     us_per_op, as it was set; gpu-check checks runtime_us_per_op against it too. us_per_op_with_setup
//     divides the longer run's whole time by its ops, its set-up included.
//   BM_CudaCallCost/call:C: one call of each kind the overhead run's ops make (the op clock's
//     event record; of the math, a kernel launch, a device-to-device copy, a cuBLAS GEMM of its
//     shape), 1000 queued back to back: us_per_call_issued, the host's time to queue one, and
//     us_per_call, the time per call until the device has run them all (the larger of the
//     host's and the device's).
//   BM_KernelBandwidth/kernel:K: one launcher (named in the label) in a GPT's shape (LayerNorm and its gradients and
//     the bias gradient on 8192 x 768, the causal softmax on 48 x 1024², bias + GELU and its
//     backward on the feed-forward's 8192 x 3072, cross entropy on 2048 x 50304), timed with
//     CUDA events; counters GB_per_s = the bytes the kernel must move at least / its time, and
//     of_peak = that over the GPU's memory bandwidth (2 x memory clock x bus width), which a
//     memory-bound kernel should bring near 1 (issue 57: >= 0.7 for the element-wise and row
//     kernels, gpu-check's report judges it).
//   BM_StepGraphs/graphs:{0,1}: gpt-gpu's model on one rank, 1F1B, its steps issued call by call
//     and replayed from CUDA Graphs (execute --graphs on): the device's idle time between ops per
//     op in the replayed steps (target with graphs <= 2 us, issue 57), the host's cost per op
//     beside it, the step time and samples/s (see BM_StepGraphs).
//   taskset -c 0 build/tests/bench/cuda_bench
#include <benchmark/benchmark.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "../exec/fake_transport.h"
#include "stagecraft/exec/cpu_device.h"
#include "stagecraft/exec/cuda_device.h"
#include "stagecraft/exec/optimizer.h"
#include "stagecraft/exec/runtime.h"
#include "stagecraft/exec/stage.h"
#include "stagecraft/exec/step_graphs.h"
#include "stagecraft/kernels/cuda.h"
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

enum class LayerOp { kF, kI, kW };

// The row-major GEMM each layer op makes (MlpStage: F = x·wᵀ, I = dz·w, W = dzᵀ·x, each written
// over), as LinearOps::gemm takes it.
struct OpGemm {
  bool trans_a, trans_b;
  int m, n, k;
};
OpGemm GemmOf(LayerOp op) {
  switch (op) {
    case LayerOp::kF: return {false, true, kRows, kHidden, kHidden};
    case LayerOp::kI: return {false, false, kRows, kHidden, kHidden};
    case LayerOp::kW: return {true, false, kHidden, kHidden, kRows};
  }
  return {};
}

// A bare cublasGemmEx of the layer op's own GEMM (its shape, transposes and column-major
// mapping, ToColumnMajor) in `precision`, inputs already in its storage type, output fp32 written
// over: what cuBLAS itself reaches on that GEMM, in TFLOP/s.
double BareCublasTflops(cudaStream_t stream, GemmPrecision precision, LayerOp op) {
  const bool half = precision == GemmPrecision::kBf16 || precision == GemmPrecision::kFp16;
  const cudaDataType_t in = precision == GemmPrecision::kBf16 ? CUDA_R_16BF
                            : precision == GemmPrecision::kFp16 ? CUDA_R_16F
                                                                : CUDA_R_32F;
  const cublasComputeType_t compute =
      precision == GemmPrecision::kTf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  const size_t element = half ? 2 : 4;
  const OpGemm o = GemmOf(op);
  const ColumnMajorGemm g = ToColumnMajor(o.trans_a, o.trans_b, o.m, o.n, o.k);
  const size_t a_count = size_t(o.m) * o.k, b_count = size_t(o.k) * o.n, c_count = size_t(o.m) * o.n;
  void *a = nullptr, *b = nullptr, *c = nullptr;
  SC_CUDA_CHECK(cudaMalloc(&a, element * a_count));
  SC_CUDA_CHECK(cudaMalloc(&b, element * b_count));
  SC_CUDA_CHECK(cudaMalloc(&c, sizeof(float) * c_count));
  SC_CUDA_CHECK(cudaMemsetAsync(a, 0, element * a_count, stream));
  SC_CUDA_CHECK(cudaMemsetAsync(b, 0, element * b_count, stream));
  cublasHandle_t blas = nullptr;
  SC_CUBLAS_BENCH_CHECK(cublasCreate(&blas));
  SC_CUBLAS_BENCH_CHECK(cublasSetStream(blas, stream));
  const float alpha = 1, beta = 0;
  auto gemm = [&] {
    SC_CUBLAS_BENCH_CHECK(cublasGemmEx(blas, g.trans_first ? CUBLAS_OP_T : CUBLAS_OP_N,
                                       g.trans_second ? CUBLAS_OP_T : CUBLAS_OP_N, g.m, g.n, g.k, &alpha, b, in,
                                       g.ld_first, a, in, g.ld_second, &beta, c, CUDA_R_32F, g.ld_out, compute,
                                       CUBLAS_GEMM_DEFAULT));
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
  return 2.0 * o.m * o.n * o.k * reps / (ms * 1e-3) / 1e12;
}


void BM_LayerOpVsCublas(benchmark::State& state) {
  if (NoGpu(state)) return;
  const auto op = static_cast<LayerOp>(state.range(0));
  const auto precision = static_cast<GemmPrecision>(state.range(1));
  const bool stepped = state.range(2) != 0;
  auto device = MakeCudaDevice(0, precision);
  auto stream = static_cast<cudaStream_t>(CudaComputeStream(*device));
  const double bare = BareCublasTflops(stream, precision, op);

  MlpStage stage(*device, StageShape{.first_layer = 0, .layers = 1, .hidden = kHidden, .rows = kRows});
  Buffer params(*device, stage.ParamFloats());
  stage.InitParams(MlpModel{.layers = 1, .hidden = kHidden}, params.data());
  Buffer grads(*device, stage.ParamFloats());
  if (stepped) {
    Buffer velocity(*device, stage.ParamFloats());
    device->memory().Fill(velocity.data(), 0.0f, stage.ParamFloats());
    device->memory().Fill(grads.data(), 0.0f, stage.ParamFloats());
    device->ops().optimizer.sgd_momentum(device->op_context(), stage.ParamFloats(), params.data(), params.data(),
                                         velocity.data(), grads.data(), 1.0f, 0.0f, 0.0f);
  }
  Buffer x(*device, stage.ActivationFloats());
  device->memory().Fill(x.data(), 0.25f, stage.ActivationFloats());
  // One F → I → W round with only `op` between the events; returns its milliseconds.
  auto round = [&]() {
    Activations saved;
    Buffer in(*device, stage.ActivationFloats());
    device->memory().Copy(in.data(), x.data(), stage.ActivationFloats());
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
    ->ArgNames({"op", "precision", "stepped"})
    ->ArgsProduct({{static_cast<int>(LayerOp::kF), static_cast<int>(LayerOp::kI), static_cast<int>(LayerOp::kW)},
                   {static_cast<int>(GemmPrecision::kTf32), static_cast<int>(GemmPrecision::kBf16),
                    static_cast<int>(GemmPrecision::kFp32)},
                   {0, 1}})
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

// A transport for a one-rank run: no peers, so no transfers.
class OneRankTransport final : public testing::AgreeingTransport {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string Name() const override { return "none"; }
  Request Isend(const float*, int64_t, int, int64_t) override { throw std::logic_error("one rank sends nothing"); }
  Request Irecv(float*, int64_t, int, int64_t) override { throw std::logic_error("one rank receives nothing"); }
  [[noreturn]] void Abort(int exit_code) override { std::exit(exit_code); }
};

// The overhead run's layer, so small that its math is negligible: BM_RuntimeOverheadPerOp's model
// and BM_CudaCallCost's calls share it.
constexpr int kOverheadRows = 4;     // microbatch_size
constexpr int kOverheadHidden = 16;  // model.mlp.hidden

// The math of a one-rank, one-stage 1F1B run of `microbatches` microbatches and two steps with
// no runtime around it: the calls RunRank makes on the device for each op, in its order (per
// microbatch the stage input's copy from the dataset, F keeping its activations, the loss, B
// adding the weight gradients; per step the optimizer's update, which leaves them zeroed), and
// none of its own (no op clock, weight store, mailbox, memory samples or loss read-back).
class BareMath {
 public:
  BareMath(Device& device, const TrainingConfig& config, const Dataset& data, int microbatches)
      : device_(device),
        config_(config),
        data_(data),
        microbatches_(microbatches),
        stage_(MakeStage(device, config, 0, config.layers_per_stage.at(0), true, true)),
        params_(device, stage_->ParamFloats()),
        grads_(device, stage_->ParamFloats()),
        losses_(device, microbatches),
        optimizer_(device, config, stage_->ParamFloats()),
        loss_(LossShapeFor(config)) {
    stage_->InitParams(params_.data());
    device.memory().Fill(grads_.data(), 0.0f, stage_->ParamFloats());
  }

  double Seconds() {
    device_.streams().Synchronize();
    const auto start = std::chrono::steady_clock::now();
    for (int step = 0; step < kSteps; ++step) {
      for (int mb = 0; mb < microbatches_; ++mb) {
        const int64_t sample = data_.MicrobatchOf(int64_t{step} * microbatches_ + mb);
        Buffer x(device_, stage_->InputFloats());
        device_.memory().Copy(x.data(), data_.inputs.data() + sample * x.size(), x.size());
        Activations saved;
        Buffer y = stage_->Forward(params_.data(), std::move(x), &saved, true);
        Buffer dy(device_, y.size());
        device_.ops().loss.forward(device_.op_context(), loss_.kind, loss_.rows, loss_.cols, y.data(),
                                   data_.targets.data() + sample * loss_.target_floats, dy.data(), losses_.data() + mb,
                                   config_.loss_scale);
        stage_->Backward(params_.data(), std::move(dy), &saved, GradTarget{grads_.data(), true});
      }
      optimizer_.Step(params_.data(), params_.data(), grads_.data(),
                      1.0f / (static_cast<float>(microbatches_) * config_.loss_scale), config_.lr);
    }
    device_.streams().Synchronize();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }

  static constexpr int kSteps = 2;  // the runs' steps (GeneratorParams::steps)

 private:
  Device& device_;
  const TrainingConfig& config_;
  const Dataset& data_;
  int microbatches_;
  std::unique_ptr<StageModel> stage_;
  Buffer params_, grads_, losses_;
  Optimizer optimizer_;
  LossShape loss_;
};

void BM_RuntimeOverheadPerOp(benchmark::State& state) {
  const bool cuda = state.range(0) != 0;
  if (cuda && NoGpu(state)) return;
  auto device = cuda ? MakeCudaDevice(0, GemmPrecision::kFp32) : MakeCpuDevice();
  TrainingConfig config;
  config.model = MlpModel{.layers = 1, .hidden = kOverheadHidden};
  config.microbatch_size = kOverheadRows;
  config.layers_per_stage = {1};
  OneRankTransport transport;
  // Two runs that differ only in their microbatches: the difference of their times over the
  // difference of their op counts leaves out what a run costs whatever its length (its set-up,
  // the stages and buffers it makes, the weights read back at its end).
  struct Run {
    schedules::Schedule schedule;
    Dataset data;
    double ops = 0;
  };
  auto make = [&](int microbatches) {
    schedules::GeneratorParams p;
    p.ranks = 1;
    p.microbatches = microbatches;
    p.steps = BareMath::kSteps;
    Run r{schedules::Lower(schedules::Generate("1f1b", p)), MakeDataset(*device, config, int64_t{microbatches} * 2, true, true)};
    r.ops = static_cast<double>(r.schedule.ops[0].size());
    RunRank(r.schedule, config, r.data, *device, transport);  // warm
    return r;
  };
  const Run shorter = make(32), longer = make(96);
  auto seconds_of = [&](const Run& r) {
    const auto start = std::chrono::steady_clock::now();
    RunRank(r.schedule, config, r.data, *device, transport);
    device->streams().Synchronize();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  BareMath bare_shorter(*device, config, shorter.data, 32), bare_longer(*device, config, longer.data, 96);
  bare_shorter.Seconds();  // warm
  bare_longer.Seconds();
  double extra_seconds = 0, whole_seconds = 0, bare_extra_seconds = 0;
  for (auto _ : state) {
    const double a = seconds_of(shorter), b = seconds_of(longer);
    state.SetIterationTime(b);
    extra_seconds += b - a;
    whole_seconds += b;
    bare_extra_seconds += bare_longer.Seconds() - bare_shorter.Seconds();
  }
  const double n = static_cast<double>(state.iterations());
  const double added_ops = (longer.ops - shorter.ops) * n;
  state.counters["us_per_op"] = extra_seconds * 1e6 / added_ops;
  state.counters["math_us_per_op"] = bare_extra_seconds * 1e6 / added_ops;
  state.counters["runtime_us_per_op"] = (extra_seconds - bare_extra_seconds) * 1e6 / added_ops;
  state.counters["us_per_op_with_setup"] = whole_seconds * 1e6 / (longer.ops * n);
  state.SetLabel(device->Name());
}
BENCHMARK(BM_RuntimeOverheadPerOp)->ArgName("cuda")->Arg(1)->Arg(0)->Repetitions(3)->UseManualTime()->Unit(benchmark::kMillisecond);

// Step graphs at scenarios/gpt-gpu.yaml's shape (GPT-2 small: 12 blocks of hidden 768, 12 heads,
// 1024 tokens, vocabulary 50304; TF32; 8 microbatches of 2), its 12 blocks on one rank, 1F1B:
// runs of kShortSteps and kLongSteps steps, with the step graphs off (graphs:0) and on
// (graphs:1). From the longer run's stamps, from step 2 on (the replayed steps):
// gpu_idle_us_per_op, the device's idle time between consecutive ops per op (issue 57's target
// with graphs: <= 2 us), and gpu_idle_us_per_pass, between two passes of one captured segment
// (the same positions for graphs:0; exec::IdleBetweenOps). host_us_per_op: the host's time on
// the run's work (its loop less its waits for the device's read-backs, RankRun) that the longer
// run adds, per op it adds; step_ms: the wall time it adds per step.
constexpr int kShortSteps = 4, kLongSteps = 8;

void BM_StepGraphs(benchmark::State& state) {
  if (NoGpu(state)) return;
  const bool graphs = state.range(0) != 0;
  auto device = MakeCudaDevice(0, GemmPrecision::kTf32);
  TrainingConfig config;
  config.gpt = GptModel{.layers = 12, .hidden = 768, .heads = 12, .seq = 1024, .vocab = 50304, .seed = 1};
  config.microbatch_size = 2;
  config.optimizer = "adam";
  config.lr = 3e-4f;
  config.layers_per_stage = {12};
  OneRankTransport transport;
  const int microbatches = 8;
  const Dataset data = MakeDataset(*device, config, microbatches, true, true);
  const auto make = [&](int steps) {
    schedules::GeneratorParams p;
    p.ranks = 1;
    p.microbatches = microbatches;
    p.steps = steps;
    return schedules::Lower(schedules::Generate("1f1b", p));
  };
  const schedules::Schedule shorter = make(kShortSteps), longer = make(kLongSteps);
  RunHooks hooks;
  hooks.step_graphs = graphs;
  // The plan a run with graphs gets: with graphs:0 it only says where the segments' passes are.
  const StepGraphPlan plan =
      PlanStepGraphs(longer, 0, StepGraphConditions{.device_has_graphs = true, .requested = true});
  if (!plan.enabled) {
    state.SkipWithError(("step graphs refused: " + plan.why_not).c_str());
    return;
  }
  const auto wall = [&](const schedules::Schedule& s, RankRun* run) {
    device->streams().Synchronize();
    const auto start = std::chrono::steady_clock::now();
    *run = RunRank(s, config, data, *device, transport, hooks);
    device->streams().Synchronize();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  RankRun warm;
  wall(shorter, &warm);
  double added_s = 0, host_ns = 0, idle_ns = 0, pass_idle_ns = 0;
  int64_t gaps = 0, pass_gaps = 0;
  for (auto _ : state) {
    RankRun a, b;
    const double short_s = wall(shorter, &a), long_s = wall(longer, &b);
    state.SetIterationTime(long_s);
    added_s += long_s - short_s;
    host_ns += static_cast<double>((b.host_loop_ns - b.host_wait_ns) - (a.host_loop_ns - a.host_wait_ns));
    const StepIdle idle = IdleBetweenOps(longer.ops[0], b.record.ops, plan, 2);
    idle_ns += static_cast<double>(idle.idle_ns);
    pass_idle_ns += static_cast<double>(idle.pass_idle_ns);
    gaps += idle.ops;
    pass_gaps += idle.passes;
  }
  const double n = static_cast<double>(state.iterations());
  const double added_ops = static_cast<double>(longer.ops[0].size() - shorter.ops[0].size()) * n;
  state.counters["gpu_idle_us_per_op"] = gaps > 0 ? idle_ns * 1e-3 / static_cast<double>(gaps) : 0;
  state.counters["gpu_idle_us_per_pass"] = pass_gaps > 0 ? pass_idle_ns * 1e-3 / static_cast<double>(pass_gaps) : 0;
  state.counters["host_us_per_op"] = host_ns * 1e-3 / added_ops;
  state.counters["step_ms"] = added_s * 1e3 / (static_cast<double>(kLongSteps - kShortSteps) * n);
  state.counters["samples_per_s"] = static_cast<double>(microbatches * config.microbatch_size) /
                                    (added_s / (static_cast<double>(kLongSteps - kShortSteps) * n));
  state.SetLabel(graphs ? "step graphs" : "eager");
}
BENCHMARK(BM_StepGraphs)->ArgName("graphs")->Arg(0)->Arg(1)->Iterations(1)->Repetitions(3)->UseManualTime()->Unit(benchmark::kMillisecond);

// One call of each kind the overhead run's ops make on the cuda device, in its shape.
constexpr int kCallKinds = 4;
std::string CallName(int kind) {
  switch (kind) {
    case 0: return "event record (op clock stamp)";
    case 1: return "kernel launch (fill)";
    case 2: return "device-to-device copy";
    default:
      return "cuBLAS GEMM " + std::to_string(kOverheadRows) + "x" + std::to_string(kOverheadHidden) + "x" +
             std::to_string(kOverheadHidden);
  }
}

void BM_CudaCallCost(benchmark::State& state) {
  if (NoGpu(state)) return;
  const int kind = static_cast<int>(state.range(0));
  auto device = MakeCudaDevice(0, GemmPrecision::kFp32);
  constexpr int kCalls = 1000;
  Buffer a(*device, kOverheadRows * kOverheadHidden), w(*device, kOverheadHidden * kOverheadHidden),
      c(*device, kOverheadRows * kOverheadHidden);
  device->memory().Fill(a.data(), 0.0f, a.size());
  device->memory().Fill(w.data(), 0.0f, w.size());
  auto call = [&] {
    switch (kind) {
      case 0:
        (void)device->clock().Stamp();
        break;
      case 1:
        device->memory().Fill(c.data(), 1.0f, c.size());
        break;
      case 2:
        device->memory().Copy(c.data(), a.data(), a.size());
        break;
      default:
        device->ops().linear.gemm(device->op_context(), false, true, kOverheadRows, kOverheadHidden, kOverheadHidden,
                                  1.0f, a.data(), w.data(), 0.0f, c.data());
    }
  };
  double issued = 0;  // the host's queueing alone, summed over the iterations
  auto seconds_of_calls = [&] {
    device->streams().Synchronize();
    device->clock().ClearStamps();
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < kCalls; ++i) call();
    issued += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    device->streams().Synchronize();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  seconds_of_calls();  // warm: kernels loaded, cuBLAS's heuristics cached, the stamps' events made
  issued = 0;
  double seconds = 0;
  for (auto _ : state) {
    const double s = seconds_of_calls();
    state.SetIterationTime(s);
    seconds += s;
  }
  const double calls = kCalls * static_cast<double>(state.iterations());
  state.counters["us_per_call_issued"] = issued * 1e6 / calls;
  state.counters["us_per_call"] = seconds * 1e6 / calls;
  state.SetLabel(CallName(kind));
}
BENCHMARK(BM_CudaCallCost)->ArgName("call")->DenseRange(0, kCallKinds - 1)->Repetitions(3)->UseManualTime()->Unit(benchmark::kMillisecond);

// Zeroed device floats, freed on scope exit.
struct DeviceFloats {
  explicit DeviceFloats(int64_t n) {
    SC_CUDA_CHECK(cudaMalloc(&data, static_cast<size_t>(n) * sizeof(float)));
    SC_CUDA_CHECK(cudaMemset(data, 0, static_cast<size_t>(n) * sizeof(float)));
  }
  ~DeviceFloats() { (void)cudaFree(data); }
  DeviceFloats(const DeviceFloats&) = delete;
  DeviceFloats& operator=(const DeviceFloats&) = delete;
  float* data = nullptr;
};

// The GPU's memory bandwidth in bytes per second: double data rate x clock x bus width.
double PeakBytesPerSecond() {
  int gpu = 0, clock_khz = 0, bus_bits = 0;
  SC_CUDA_CHECK(cudaGetDevice(&gpu));
  SC_CUDA_CHECK(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrMemoryClockRate, gpu));
  SC_CUDA_CHECK(cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, gpu));
  return 2.0 * clock_khz * 1e3 * bus_bits / 8.0;
}

// A GPT's shapes: LayerNorm rows (B·T x C), attention scores (B·NH matrices of T²), logits.
constexpr int kLnRows = 8192, kLnCols = 768, kMatrices = 48, kSeq = 1024, kPositions = 2048, kVocab = 50304;
constexpr int64_t kLnFloats = int64_t{kLnRows} * kLnCols, kScoreFloats = int64_t{kMatrices} * kSeq * kSeq;
constexpr int64_t kLogitFloats = int64_t{kPositions} * kVocab;
constexpr int kFfCols = 4 * kLnCols;  // the feed-forward's hidden width
constexpr int64_t kFfFloats = int64_t{kLnRows} * kFfCols;

// Every tensor the kernel benchmarks use, zeroed (the values do not change the work).
struct KernelBuffers {
  static int64_t ScratchFloats() {
    return std::max(kernels::LayerNormBackwardWeightScratchFloats(kLnRows, kLnCols),
                    kernels::LossScratchFloats(kPositions));
  }
  DeviceFloats ln_in{kLnFloats}, ln_out{kLnFloats}, cols_a{kLnCols}, cols_b{kLnCols}, rows_a{kLnRows},
      rows_b{kLnRows};
  DeviceFloats p{kScoreFloats}, dp{kScoreFloats};
  DeviceFloats logits{kLogitFloats}, dlogits{kLogitFloats}, labels{kPositions}, loss{1};
  DeviceFloats ff_a{kFfFloats}, ff_b{kFfFloats}, ff_c{kFfFloats}, ff_bias{kFfCols};
  DeviceFloats scratch{ScratchFloats()};
  kernels::ScratchSpan span() { return kernels::ScratchSpan{scratch.data, ScratchFloats()}; }
};

struct KernelCase {
  const char* name;
  double bytes;  // what the kernel must read and write at least: each tensor once
  std::function<void()> launch;
};

KernelCase MakeKernelCase(int kernel, KernelBuffers& b, cudaStream_t stream) {
  namespace k = kernels;
  constexpr double kF = sizeof(float);
  switch (kernel) {
    case 0:
      return {"layernorm", 2 * kLnFloats * kF, [&b, stream] {
                k::LaunchLayerNorm(kLnRows, kLnCols, b.ln_in.data, b.cols_a.data, b.cols_b.data, b.ln_out.data,
                                   b.rows_a.data, b.rows_b.data, stream);
              }};
    case 1:  // dout and x (one tensor here) read, dx read and written
      return {"layernorm_backward_input", 3 * kLnFloats * kF, [&b, stream] {
                k::LaunchLayerNormBackwardInput(kLnRows, kLnCols, b.ln_in.data, b.ln_in.data, b.cols_a.data,
                                                b.rows_a.data, b.rows_b.data, b.ln_out.data, true, stream);
              }};
    case 2:
      return {"layernorm_backward_weight", 2 * kLnFloats * kF, [&b, stream] {
                k::LaunchLayerNormBackwardWeight(kLnRows, kLnCols, b.ln_in.data, b.ln_out.data, b.rows_a.data,
                                                 b.rows_b.data, b.cols_a.data, b.cols_b.data, true, b.span(), stream);
              }};
    case 3:
      return {"bias_grad", 1 * kLnFloats * kF, [&b, stream] {
                k::LaunchBiasGrad(kLnRows, kLnCols, b.ln_in.data, b.cols_a.data, true, b.span(), stream);
              }};
    case 4:  // the lower triangle read, every score written
      return {"causal_softmax", 1.5 * kScoreFloats * kF,
              [&b, stream] { k::LaunchCausalSoftmax(kMatrices, kSeq, b.dp.data, stream); }};
    case 5:  // p's and dp's lower triangles read, every score written
      return {"causal_softmax_backward", 2 * kScoreFloats * kF,
              [&b, stream] { k::LaunchCausalSoftmaxBackward(kMatrices, kSeq, b.p.data, b.dp.data, stream); }};
    case 6:  // z read and written, out written (the bias is 3072 floats)
      return {"bias_gelu", 3 * kFfFloats * kF, [&b, stream] {
                k::LaunchBiasActivation(k::Activation::kGelu, kLnRows, kFfCols, b.ff_a.data, b.ff_bias.data, nullptr,
                                        b.ff_b.data, stream);
              }};
    case 7:  // dout and z read, dz written
      return {"gelu_backward", 3 * kFfFloats * kF, [&b, stream] {
                k::LaunchActivationBackward(k::Activation::kGelu, kFfFloats, b.ff_a.data, b.ff_b.data, b.ff_c.data,
                                            stream);
              }};
    default:
      return {"cross_entropy", 2 * kLogitFloats * kF, [&b, stream] {
                k::LaunchLoss(k::LossKind::kCrossEntropy, kPositions, kVocab, b.logits.data, b.labels.data,
                              b.dlogits.data, b.loss.data, 1.0f, b.span(), stream);
              }};
  }
}
constexpr int kKernelCases = 9;

void BM_KernelBandwidth(benchmark::State& state) {
  if (NoGpu(state)) return;
  SC_CUDA_CHECK(cudaSetDevice(0));
  cudaStream_t stream = nullptr;
  SC_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  {
    KernelBuffers buffers;
    const KernelCase kernel = MakeKernelCase(static_cast<int>(state.range(0)), buffers, stream);
    for (int i = 0; i < 3; ++i) kernel.launch();  // warm: kernels loaded, caches as in a run
    double total_ms = 0;
    for (auto _ : state) {
      const double ms = TimeOnStream(stream, kernel.launch);
      state.SetIterationTime(ms * 1e-3);
      total_ms += ms;
    }
    const double bytes_per_s = kernel.bytes * static_cast<double>(state.iterations()) / (total_ms * 1e-3);
    state.counters["GB_per_s"] = bytes_per_s / 1e9;
    state.counters["of_peak"] = bytes_per_s / PeakBytesPerSecond();
    state.SetLabel(kernel.name);
  }
  SC_CUDA_CHECK(cudaStreamDestroy(stream));
}
BENCHMARK(BM_KernelBandwidth)
    ->ArgName("kernel")
    ->DenseRange(0, kKernelCases - 1)
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace stagecraft::exec

BENCHMARK_MAIN();
