// CudaDevice (cuda_device.h): the cuda backend's Device. Every CUDA and cuBLAS call is checked;
// a failure throws with the host, file:line, the call and the library's own message (the
// command adds the rank). All work goes onto one non-blocking compute stream, so buffers
// freed to the pool, the workspace and the 16-bit weight copies are reused only by work queued
// after them. Device memory comes stream-ordered from a memory pool of the device's own that
// keeps what is freed (cudaMallocFromPoolAsync): no allocation waits for the device, whose
// queue may hold NCCL kernels that wait on another rank.
#include "stagecraft/exec/cuda_device.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <climits>
#include <cstdint>
#include <cmath>
#include <cstdio>
#include <initializer_list>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "event_stamps.h"
#include "half_gemm_inputs.h"
#include "keeping_pool.h"

#include "stagecraft/exec/block_pool.h"
#include "stagecraft/kernels/cuda.h"
#include "stagecraft/kernels/cuda_check.h"

namespace stagecraft::exec {
namespace {

[[noreturn]] void ThrowCublasError(cublasStatus_t status, const char* call, const char* file, int line) {
  throw std::runtime_error(kernels::HostName() + ": " + file + ":" + std::to_string(line) + ": cuBLAS error " +
                           cublasGetStatusName(status) + " '" + cublasGetStatusString(status) + "' in " + call);
}

#define SC_CUBLAS_CHECK(call)                                                \
  do {                                                                       \
    const cublasStatus_t sc_cublas_status = (call);                          \
    if (sc_cublas_status != CUBLAS_STATUS_SUCCESS) {                         \
      ThrowCublasError(sc_cublas_status, #call, __FILE__, __LINE__);         \
    }                                                                        \
  } while (0)

class CudaDevice final : public Device {
 public:
  CudaDevice(int gpu, GemmPrecision precision) : gpu_(gpu), precision_(precision) {
    kernels::PreferEagerModuleLoading();  // before this process's first CUDA call (cuda.h)
    SC_CUDA_CHECK(cudaSetDevice(gpu));
    cudaDeviceProp prop{};
    SC_CUDA_CHECK(cudaGetDeviceProperties(&prop, gpu));
    name_ = prop.name;
    SC_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    pool_ = MakeKeepingPool(gpu);
    SC_CUBLAS_CHECK(cublasCreate(&blas_));
    SC_CUBLAS_CHECK(cublasSetStream(blas_, stream_));
    SC_CUBLAS_CHECK(cublasSetPointerMode(blas_, CUBLAS_POINTER_MODE_HOST));
    stamps_.emplace(stream_);
    kernels::PreloadKernels();  // ours load now whatever the mode; cuBLAS's only when eager
    kernels::WarnIfEagerLoadingDidNotTakeHold();
    if (precision_ == GemmPrecision::kBf16 || precision_ == GemmPrecision::kFp16) {
      halves_.emplace(precision_ == GemmPrecision::kBf16 ? kernels::HalfFormat::kBf16 : kernels::HalfFormat::kFp16,
                      stream_,
                      HalfGemmInputs::Memory{[this](int64_t bytes) { return TakeOrdered(bytes); },
                                             [this](int64_t delta_bytes) { Track(delta_bytes); },
                                             [this](int64_t bytes) { return Workspace(bytes); }});
    }
  }

  // The kept blocks go back to the pool, stream-ordered as they came (nothing waits for the
  // device): the next run's allocations of any size take them from there.
  void ReleaseCached() override {
    if (halves_) halves_->ReleaseSpares();
    cudaError_t first = cudaSuccess;
    free_.Drain([&](float* block, int64_t) {
      const cudaError_t status = cudaFreeAsync(block, stream_);
      if (first == cudaSuccess) first = status;
    });
    if (first != cudaSuccess) kernels::ThrowCudaError(first, "cudaFreeAsync(kept block)", __FILE__, __LINE__);
  }

  // Grows the pool by `bytes` before the run: one allocation of them, freed at once, stays in
  // the pool (its release threshold keeps everything). A hint: a device without room keeps
  // what it has, and the run's own allocations say so if they fail.
  void Reserve(int64_t bytes) override {
    if (bytes <= 0) return;
    void* block = nullptr;
    if (cudaMallocFromPoolAsync(&block, static_cast<size_t>(bytes), pool_, stream_) != cudaSuccess) {
      (void)cudaGetLastError();  // clear it: the device stays usable
      return;
    }
    SC_CUDA_CHECK(cudaFreeAsync(block, stream_));
  }

  // How long the destructor lets the compute stream drain.
  static constexpr int64_t kDrainNs = 10'000'000'000;

  // Best effort, and bounded: the run is over (or failing), and a destructor must neither throw
  // nor wait for good on a queue held by a transfer that never comes (a peer gone; its
  // communicators are aborted before the device goes). Past the bound the memory is left to the
  // driver, which frees it when the process ends.
  ~CudaDevice() override {
    if (StreamDrained(stream_, kDrainNs)) {
      free_.Drain([this](float* block, int64_t) { (void)cudaFreeAsync(block, stream_); });
      halves_.reset();
      if (workspace_ != nullptr) (void)cudaFreeAsync(workspace_, stream_);
      if (StreamDrained(stream_, kDrainNs)) (void)cublasDestroy(blas_);  // it may wait for the whole device
    }
    stamps_.reset();
    (void)cudaStreamDestroy(stream_);
    (void)cudaMemPoolDestroy(pool_);  // returns at once; the driver frees the rest when unused
  }

  std::string Name() const override { return "cuda:" + std::to_string(gpu_) + " (" + name_ + ")"; }
  cudaStream_t stream() const { return stream_; }

  float* Allocate(int64_t floats) override {
    if (floats == 0) return nullptr;
    if (float* kept = free_.Take(floats)) {
      Track(floats * static_cast<int64_t>(sizeof(float)));
      return kept;
    }
    void* block = DeviceMalloc(static_cast<uint64_t>(floats) * sizeof(float));
    Track(floats * static_cast<int64_t>(sizeof(float)));
    CountSystemAllocation();
    return static_cast<float*>(block);
  }

  // A freed buffer's 16-bit copy is dropped with it: the block may come back as any tensor.
  void Free(float* data, int64_t floats) override {
    Track(-floats * static_cast<int64_t>(sizeof(float)));
    if (data == nullptr) return;
    if (halves_) halves_->Freed(data, floats);
    free_.Keep(data, floats);
  }

  void Upload(float* dst, const float* host, int64_t n) override {
    if (n == 0) return;
    SC_CUDA_CHECK(cudaMemcpyAsync(dst, host, Bytes(n), cudaMemcpyHostToDevice, stream_));
    Wrote(dst, n);
    SC_CUDA_CHECK(cudaStreamSynchronize(stream_));  // the host buffer may go right after
  }
  void Download(float* host, const float* src, int64_t n) override {
    if (n == 0) return;
    SC_CUDA_CHECK(cudaMemcpyAsync(host, src, Bytes(n), cudaMemcpyDeviceToHost, stream_));
    SC_CUDA_CHECK(cudaStreamSynchronize(stream_));
  }
  void Copy(float* dst, const float* src, int64_t n) override {
    if (n == 0) return;
    SC_CUDA_CHECK(cudaMemcpyAsync(dst, src, Bytes(n), cudaMemcpyDeviceToDevice, stream_));
    Wrote(dst, n);
  }
  void Fill(float* dst, float value, int64_t n) override {
    if (value == 0.0f && !std::signbit(value)) {
      if (n > 0) SC_CUDA_CHECK(cudaMemsetAsync(dst, 0, Bytes(n), stream_));
    } else {
      kernels::LaunchFill(n, value, dst, stream_);
    }
    Wrote(dst, n);
  }

  float* AllocateHost(int64_t floats) override {
    void* block = nullptr;
    SC_CUDA_CHECK(cudaMallocHost(&block, Bytes(floats)));
    return static_cast<float*>(block);
  }
  void FreeHost(float* data, int64_t) override { (void)cudaFreeHost(data); }

  // One matrix: GemmBatched's call with a batch of one (cuBLAS's strided-batched GEMM with one
  // matrix is its plain GEMM).
  void Gemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, const float* b, float beta,
            float* c) override {
    GemmBatched(trans_a, trans_b, m, n, k, alpha, a, int64_t{m} * k, b, int64_t{k} * n, beta, c, int64_t{m} * n, 1);
  }

  void Axpy(int64_t n, float alpha, const float* x, float* y) override {
    if (n > INT_MAX) throw std::invalid_argument("CudaDevice::Axpy: n over INT_MAX: " + std::to_string(n));
    SC_CUBLAS_CHECK(cublasSaxpy(blas_, static_cast<int>(n), &alpha, x, 1, y, 1));
    Wrote(y, n);
  }

  void BiasActivation(kernels::Activation act, int rows, int cols, float* z, const float* bias, const float* residual,
                      float* out) override {
    kernels::LaunchBiasActivation(act, rows, cols, z, bias, residual, out, stream_);
    Wrote({{z, int64_t{rows} * cols}, {out, int64_t{rows} * cols}});
  }
  void ActivationBackward(kernels::Activation act, int64_t n, const float* dout, const float* z, float* dz) override {
    kernels::LaunchActivationBackward(act, n, dout, z, dz, stream_);
    Wrote(dz, n);
  }
  void BiasGrad(int rows, int cols, const float* dz, float* bias_grad, bool accumulate) override {
    kernels::LaunchBiasGrad(rows, cols, dz, bias_grad, accumulate,
                            FloatScratch(kernels::BiasGradScratchFloats(rows, cols)), stream_);
    Wrote(bias_grad, cols);
  }
  void Loss(kernels::LossKind kind, int rows, int cols, const float* y, const float* targets, float* dy,
            float* loss, float loss_scale) override {
    kernels::LaunchLoss(kind, rows, cols, y, targets, dy, loss, loss_scale,
                        FloatScratch(kernels::LossScratchFloats(rows)), stream_);
    Wrote({{dy, int64_t{rows} * cols}, {loss, 1}});
  }
  // The updates write the next weights: their 16-bit copy is refreshed right after (made on the
  // buffer's first update), so the GEMMs that read them never round them again.
  void SgdMomentum(int64_t n, const float* w_in, float* w_out, float* velocity, float* grad, float grad_scale,
                   float lr, float momentum) override {
    kernels::LaunchSgdMomentum(n, w_in, w_out, velocity, grad, grad_scale, lr, momentum, stream_);
    Wrote({{velocity, n}, {grad, n}});
    UpdatedWeights(w_out, n);
  }
  void Adam(int64_t n, const float* w_in, float* w_out, float* m, float* v, float* grad, float grad_scale,
            const kernels::AdamParams& params) override {
    kernels::LaunchAdam(n, w_in, w_out, m, v, grad, grad_scale, params, stream_);
    Wrote({{m, n}, {v, n}, {grad, n}});
    UpdatedWeights(w_out, n);
  }

  // Each matrix of a batch is Gemm's column-major call, with the strides as given. In bf16 and
  // fp16 each input is read in 16 bits with its strides kept: from the 16-bit copy of the weight
  // buffer that holds it when there is one (UpdatedWeights), else rounded into the workspace from
  // its first matrix to the end of its last, gaps included (they lie inside the caller's tensor,
  // and the GEMM reads none of them), so any strides work, at the cost of rounding the gaps.
  void GemmBatched(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, int64_t stride_a,
                   const float* b, int64_t stride_b, float beta, float* c, int64_t stride_c, int batch) override {
    if (batch < 0 || stride_a < 0 || stride_b < 0 || stride_c < 0) {
      throw std::invalid_argument("CudaDevice::GemmBatched: negative batch or stride (batch " + std::to_string(batch) +
                                  ", strides " + std::to_string(stride_a) + ", " + std::to_string(stride_b) + ", " +
                                  std::to_string(stride_c) + ")");
    }
    // cuBLAS runs the matrices of a batch concurrently: outputs that overlap would race, where
    // the cpu backend's loop would write them one after another.
    const int64_t c_count = static_cast<int64_t>(m) * n;
    if (batch > 1 && stride_c < c_count) {
      throw std::invalid_argument("CudaDevice::GemmBatched: stride_c " + std::to_string(stride_c) +
                                  " makes the outputs overlap (each is " + std::to_string(c_count) + " floats)");
    }
    if (batch == 0) return;
    const ColumnMajorGemm g = ToColumnMajor(trans_a, trans_b, m, n, k);
    const cublasOperation_t op_first = g.trans_first ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasOperation_t op_second = g.trans_second ? CUBLAS_OP_T : CUBLAS_OP_N;
    const void* first = b;
    const void* second = a;
    cudaDataType_t in_type = CUDA_R_32F;
    cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
    if (precision_ == GemmPrecision::kTf32) compute = CUBLAS_COMPUTE_32F_FAST_TF32;
    if (halves_) {
      in_type = precision_ == GemmPrecision::kBf16 ? CUDA_R_16BF : CUDA_R_16F;
      const int64_t b_span = (batch - 1) * stride_b + static_cast<int64_t>(k) * n;
      const int64_t a_span = (batch - 1) * stride_a + static_cast<int64_t>(m) * k;
      const HalfGemmInputs::Operands halves = halves_->Round(b, b_span, a, a_span);
      first = halves.first;
      second = halves.second;
    }
    SC_CUBLAS_CHECK(cublasGemmStridedBatchedEx(blas_, op_first, op_second, g.m, g.n, g.k, &alpha, first, in_type,
                                               g.ld_first, stride_b, second, in_type, g.ld_second, stride_a, &beta, c,
                                               CUDA_R_32F, g.ld_out, stride_c, batch, compute, CUBLAS_GEMM_DEFAULT));
    Wrote(c, (batch - 1) * stride_c + c_count);
  }

  void BiasAdd(int rows, int cols, float* x, const float* bias, const float* residual) override {
    kernels::LaunchBiasAdd(rows, cols, x, bias, residual, stream_);
    Wrote(x, int64_t{rows} * cols);
  }
  void LayerNorm(int rows, int cols, const float* x, const float* gamma, const float* beta, float* out, float* mean,
                 float* rstd) override {
    kernels::LaunchLayerNorm(rows, cols, x, gamma, beta, out, mean, rstd, stream_);
    Wrote({{out, int64_t{rows} * cols}, {mean, rows}, {rstd, rows}});
  }
  void LayerNormBackwardInput(int rows, int cols, const float* dout, const float* x, const float* gamma,
                              const float* mean, const float* rstd, float* dx, bool accumulate) override {
    kernels::LaunchLayerNormBackwardInput(rows, cols, dout, x, gamma, mean, rstd, dx, accumulate, stream_);
    Wrote(dx, int64_t{rows} * cols);
  }
  void LayerNormBackwardWeight(int rows, int cols, const float* dout, const float* x, const float* mean,
                               const float* rstd, float* dgamma, float* dbeta, bool accumulate) override {
    kernels::LaunchLayerNormBackwardWeight(rows, cols, dout, x, mean, rstd, dgamma, dbeta, accumulate,
                                           FloatScratch(kernels::LayerNormBackwardWeightScratchFloats(rows, cols)),
                                           stream_);
    Wrote({{dgamma, cols}, {dbeta, cols}});
  }
  void HeadsFromRows(int batch, int seq, int heads, int head_dim, const float* rows, int64_t ld, float* out) override {
    kernels::LaunchHeadsFromRows(batch, seq, heads, head_dim, rows, ld, out, stream_);
    Wrote(out, int64_t{batch} * seq * heads * head_dim);
  }
  void RowsFromHeads(int batch, int seq, int heads, int head_dim, const float* in, float* rows, int64_t ld) override {
    kernels::LaunchRowsFromHeads(batch, seq, heads, head_dim, in, rows, ld, stream_);
    Wrote(rows, (int64_t{batch} * seq - 1) * ld + int64_t{heads} * head_dim);
  }
  void CausalSoftmax(int matrices, int seq, float* scores) override {
    kernels::LaunchCausalSoftmax(matrices, seq, scores, stream_);
    Wrote(scores, int64_t{matrices} * seq * seq);
  }
  void CausalSoftmaxBackward(int matrices, int seq, const float* p, float* dp) override {
    kernels::LaunchCausalSoftmaxBackward(matrices, seq, p, dp, stream_);
    Wrote(dp, int64_t{matrices} * seq * seq);
  }
  void Embedding(int batch, int seq, int cols, const float* tokens, const float* wte, const float* wpe,
                 float* out) override {
    kernels::LaunchEmbedding(batch, seq, cols, tokens, wte, wpe, out, stream_);
    Wrote(out, int64_t{batch} * seq * cols);
  }
  void EmbeddingBackward(int batch, int seq, int cols, int vocab, const float* tokens, const float* dout, float* dwte,
                         float* dwpe, bool accumulate) override {
    kernels::LaunchEmbeddingBackward(batch, seq, cols, vocab, tokens, dout, dwte, dwpe, accumulate, stream_);
    Wrote({{dwte, int64_t{vocab} * cols}, {dwpe, int64_t{seq} * cols}});
  }

  void Synchronize() override { SC_CUDA_CHECK(cudaStreamSynchronize(stream_)); }
  int64_t NowNs() override { return SteadyNowNs(); }

  int Stamp() override { return stamps_->Stamp(); }
  int64_t StampNs(int id) override { return stamps_->StampNs(id); }
  bool Reached(int id) override { return stamps_->Reached(id); }
  void ClearStamps() override { stamps_->Clear(); }
  int64_t EventNs(cudaEvent_t event) { return stamps_->EventNs(event); }
  int64_t PoolReservedBytes() const {
    uint64_t bytes = 0;
    SC_CUDA_CHECK(cudaMemPoolGetAttribute(pool_, cudaMemPoolAttrReservedMemCurrent, &bytes));
    return static_cast<int64_t>(bytes);
  }

 private:
  static size_t Bytes(int64_t floats) { return static_cast<size_t>(floats) * sizeof(float); }

  // cudaMallocFromPoolAsync on the compute stream from the device's pool (freed with
  // cudaFreeAsync there), with a full device reported as OutOfMemory (the runtime names the op);
  // any other failure as the call that failed.
  void* DeviceMalloc(uint64_t bytes) {
    void* block = nullptr;
    const cudaError_t status = cudaMallocFromPoolAsync(&block, static_cast<size_t>(bytes), pool_, stream_);
    const char* call = "cudaMallocFromPoolAsync";
    if (status == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();  // clear it: the device stays usable
      size_t free_bytes = 0, total_bytes = 0;
      (void)cudaMemGetInfo(&free_bytes, &total_bytes);
      throw OutOfMemory(std::string(call) + " of " + std::to_string(bytes) + " bytes on GPU " + std::to_string(gpu_) +
                        " failed: out of memory (" + std::to_string(free_bytes) + " of " +
                        std::to_string(total_bytes) + " bytes free, " + std::to_string(bytes_in_use()) +
                        " in use by this run)");
    }
    SC_CUDA_CHECK(status);
    return block;
  }

  // Work memory of one call's kernels (the launchers' scratch, a GEMM's 16-bit inputs); grown
  // when a call needs more (counted as device memory in use). Only work on the compute stream
  // uses it, one call after another, so one buffer serves them all. Stream-ordered: cudaFree
  // would wait for the whole device, NCCL's streams included, and a receive posted ahead can
  // wait on this very rank's next op (a deadlock --timeout cannot see).
  void* Workspace(int64_t bytes) {
    if (bytes > workspace_bytes_) {
      if (workspace_ != nullptr) {
        SC_CUDA_CHECK(cudaFreeAsync(workspace_, stream_));  // after the work queued before it
        Track(-workspace_bytes_);
        workspace_ = nullptr;
        workspace_bytes_ = 0;
      }
      workspace_ = TakeOrdered(bytes);
      workspace_bytes_ = bytes;
    }
    return workspace_;
  }
  kernels::ScratchSpan FloatScratch(int64_t floats) {
    return kernels::ScratchSpan{static_cast<float*>(Workspace(floats * static_cast<int64_t>(sizeof(float)))), floats};
  }

  // Stream-ordered device memory counted as in use (the workspace, the 16-bit weight copies).
  void* TakeOrdered(int64_t bytes) {
    void* block = DeviceMalloc(static_cast<uint64_t>(bytes));
    Track(bytes);
    CountSystemAllocation();
    return block;
  }

  // Every call above that writes device memory says what it wrote: the 16-bit copy of a weight
  // buffer written into is stale (half_gemm_inputs.h), and an optimizer's update refreshes it.
  struct Written {
    const float* data;
    int64_t floats;
  };
  void Wrote(const float* data, int64_t floats) {
    if (halves_) halves_->Wrote(data, floats);
  }
  void Wrote(std::initializer_list<Written> spans) {
    for (const Written& span : spans) Wrote(span.data, span.floats);
  }
  void UpdatedWeights(const float* w, int64_t n) {
    if (halves_) halves_->Updated(w, n);
  }

  int gpu_;
  GemmPrecision precision_;
  std::string name_;
  cudaStream_t stream_ = nullptr;
  cudaMemPool_t pool_ = nullptr;
  cublasHandle_t blas_ = nullptr;
  BlockPool free_;
  void* workspace_ = nullptr;
  int64_t workspace_bytes_ = 0;
  std::optional<HalfGemmInputs> halves_;  // bf16 and fp16 runs only
  std::optional<EventStamps> stamps_;
};

}  // namespace

bool HaveCudaBackend() { return true; }

int CudaDeviceCount() {
  kernels::PreferEagerModuleLoading();  // this is often the process's first CUDA call
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status == cudaSuccess) return count;
  (void)cudaGetLastError();  // clear it: the process goes on without the cuda backend
  // No device, or no driver at all (the runtime then says "insufficient driver" too, with a
  // driver version of 0), is a machine without GPUs. Anything else is a GPU this build cannot
  // use (a driver older than the toolkit, a broken install): say so once, since the gpu tests
  // then skip and --backend auto runs on the CPU.
  int driver = 0;
  (void)cudaDriverGetVersion(&driver);
  const bool no_gpu = status == cudaErrorNoDevice || (status == cudaErrorInsufficientDriver && driver == 0);
  static const bool said = [&] {
    if (!no_gpu) {
      int runtime = 0;
      (void)cudaRuntimeGetVersion(&runtime);
      std::fprintf(stderr, "stagecraft: warning: CUDA is unusable here, treated as no GPU: %s (driver %d, runtime %d)\n",
                   kernels::CudaErrorText(status, "cudaGetDeviceCount", __FILE__, __LINE__).c_str(), driver, runtime);
    }
    return true;
  }();
  (void)said;
  return 0;
}

std::string CudaPciBusId(int gpu) {
  if (gpu < 0) return {};
  kernels::PreferEagerModuleLoading();
  char id[64] = {};
  SC_CUDA_CHECK(cudaDeviceGetPCIBusId(id, sizeof(id), gpu));
  return id;
}

// No range check of its own: cudaSetDevice's failure names the call and CUDA's message
// (cudaErrorInvalidDevice for a GPU this process does not see).
std::unique_ptr<Device> MakeCudaDevice(int gpu, GemmPrecision precision) {
  return std::make_unique<CudaDevice>(gpu, precision);
}

namespace {

// `device` as the cuda device it must be for `call`; std::invalid_argument naming both otherwise.
CudaDevice& AsCuda(Device& device, const char* call) {
  auto* cuda = dynamic_cast<CudaDevice*>(&device);
  if (cuda == nullptr) throw std::invalid_argument(std::string(call) + ": " + device.Name() + " is not a cuda device");
  return *cuda;
}

}  // namespace

void* CudaComputeStream(Device& device) { return AsCuda(device, "CudaComputeStream").stream(); }

int64_t CudaPoolReservedBytes(Device& device) { return AsCuda(device, "CudaPoolReservedBytes").PoolReservedBytes(); }

int64_t CudaEventNs(Device& device, void* event) {
  return AsCuda(device, "CudaEventNs").EventNs(static_cast<cudaEvent_t>(event));
}

}  // namespace stagecraft::exec
