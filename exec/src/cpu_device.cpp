// CpuDevice: OpenBLAS + kernels/ host loops (see cpu_device.h).
#include "stagecraft/exec/cpu_device.h"

#include <cblas.h>
#include <malloc.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <new>
#include <stdexcept>
#include <vector>

#include <fmt/format.h>

#include "stagecraft/base/check.h"
#include "stagecraft/exec/block_pool.h"
#include "stagecraft/schedules/ir.h"

namespace stagecraft::exec {
namespace {

// Blocks up to this size come from the heap, whose freed memory the process keeps (see the
// constructor); a larger one is mapped on its own and faults its pages in at first touch.
constexpr int64_t kHeapBlockMaxBytes = int64_t{32} << 20;

// 64-byte aligned blocks (whole cache lines and AVX-512 vectors) from malloc, the distance to
// malloc's pointer kept in the byte before the block. glibc's aligned_alloc leaves the heap
// in pieces it does not reuse for the next aligned request of the same size, so every run
// would take fresh pages; malloc's blocks are reused as freed.
constexpr uint64_t kAlign = 64;
void* AlignedAlloc(uint64_t bytes) {
  if (bytes > UINT64_MAX - kAlign) return nullptr;
  auto* raw = static_cast<unsigned char*>(std::malloc(bytes + kAlign));
  if (raw == nullptr) return nullptr;
  unsigned char* block = raw + (kAlign - reinterpret_cast<uintptr_t>(raw) % kAlign);  // 1 .. 64 bytes on
  block[-1] = static_cast<unsigned char>(block - raw);
  return block;
}
void AlignedFree(void* p) {
  auto* block = static_cast<unsigned char*>(p);
  std::free(block - block[-1]);
}

class CpuDevice final : public Device {
 public:
  CpuDevice() {
    openblas_set_num_threads(1);
#ifdef M_MMAP_THRESHOLD
    // glibc maps blocks of 128 KiB and more on their own and unmaps them when freed, and gives
    // the heap's free top back to the system: memory a run freed, or that Reserve faulted in,
    // would fault again at its next use. Here blocks up to 32 MiB (glibc's largest threshold)
    // come from the heap, and the heap keeps what is freed.
    mallopt(M_MMAP_THRESHOLD, static_cast<int>(kHeapBlockMaxBytes));
    mallopt(M_TRIM_THRESHOLD, INT_MAX);
#endif
  }
  ~CpuDevice() override { ReleaseCached(); }

  std::string Name() const override { return "cpu"; }

  float* Allocate(int64_t floats) override {
    SC_CHECK(floats > 0, "allocations are never empty");
    if (float* kept = free_.Take(floats)) {
      Track(floats * static_cast<int64_t>(sizeof(float)));
      return kept;
    }
    const uint64_t bytes = static_cast<uint64_t>(floats) * sizeof(float);
    void* p = bytes / sizeof(float) != static_cast<uint64_t>(floats) ? nullptr : AlignedAlloc(bytes);
    if (p == nullptr) {
      throw OutOfMemory(fmt::format("cannot allocate {} bytes of host memory ({} bytes in use)", bytes, bytes_in_use()));
    }
    Track(floats * static_cast<int64_t>(sizeof(float)));
    CountSystemAllocation();
    return static_cast<float*>(p);
  }
  void Free(float* data, int64_t floats) override {
    free_.Keep(data, floats);
    Track(-floats * static_cast<int64_t>(sizeof(float)));
  }
  void Upload(float* dst, const float* host, int64_t n) override { Copy(dst, host, n); }
  void Download(float* host, const float* src, int64_t n) override { Copy(host, src, n); }
  void Copy(float* dst, const float* src, int64_t n) override { std::memcpy(dst, src, n * sizeof(float)); }
  void Fill(float* dst, float value, int64_t n) override {
    for (int64_t i = 0; i < n; ++i) dst[i] = value;
  }
  void ReleaseCached() override {
    free_.Drain([](float* block, int64_t) { AlignedFree(block); });
  }
  // Faults `bytes` of heap in, in blocks the heap keeps once freed, and frees them: the next
  // allocations are carved out of those pages.
  void Reserve(int64_t bytes) override {
    const int64_t page = std::max<int64_t>(1, sysconf(_SC_PAGESIZE));
    std::vector<void*> blocks;
    for (int64_t left = bytes; left > 0; left -= kHeapBlockMaxBytes / 2) {
      const int64_t n = std::min(left, kHeapBlockMaxBytes / 2);
      auto* block = static_cast<volatile char*>(std::malloc(static_cast<size_t>(n)));
      if (block == nullptr) break;  // a hint: what cannot be had now is faulted in when used
      for (int64_t at = 0; at < n; at += page) block[at] = 0;
      blocks.push_back(const_cast<char*>(block));
    }
    for (void* block : blocks) std::free(block);
  }

  void Gemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, const float* b, float beta,
            float* c) override {
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, m, n, k,
                alpha, a, trans_a ? m : k, b, trans_b ? k : n, beta, c, n);
  }
  void Axpy(int64_t n, float alpha, const float* x, float* y) override {
    cblas_saxpy(static_cast<int>(n), alpha, x, 1, y, 1);
  }

  void BiasActivation(kernels::Activation act, int rows, int cols, float* z, const float* bias, const float* residual,
                      float* out) override {
    kernels::BiasActivation(act, rows, cols, z, bias, residual, out);
  }
  void ActivationBackward(kernels::Activation act, int64_t n, const float* dout, const float* z, float* dz) override {
    kernels::ActivationBackward(act, n, dout, z, dz);
  }
  void BiasGrad(int rows, int cols, const float* dz, float* bias_grad, bool accumulate) override {
    kernels::BiasGrad(rows, cols, dz, bias_grad, accumulate);
  }
  void Loss(kernels::LossKind kind, int rows, int cols, const float* y, const float* targets, float* dy,
            float* loss, float loss_scale) override {
    *loss = kernels::Loss(kind, rows, cols, y, targets, dy, loss_scale);
  }
  void SgdMomentum(int64_t n, const float* w_in, float* w_out, float* velocity, float* grad, float grad_scale,
                   float lr, float momentum) override {
    kernels::SgdMomentum(n, w_in, w_out, velocity, grad, grad_scale, lr, momentum);
  }
  void Adam(int64_t n, const float* w_in, float* w_out, float* m, float* v, float* grad, float grad_scale,
            const kernels::AdamParams& params) override {
    kernels::Adam(n, w_in, w_out, m, v, grad, grad_scale, params);
  }

  void GemmBatched(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, int64_t stride_a,
                   const float* b, int64_t stride_b, float beta, float* c, int64_t stride_c, int batch) override {
    for (int i = 0; i < batch; ++i) Gemm(trans_a, trans_b, m, n, k, alpha, a + i * stride_a, b + i * stride_b, beta, c + i * stride_c);
  }
  void BiasAdd(int rows, int cols, float* x, const float* bias, const float* residual) override {
    kernels::BiasAdd(rows, cols, x, bias, residual);
  }
  void LayerNorm(int rows, int cols, const float* x, const float* gamma, const float* beta, float* out, float* mean,
                 float* rstd) override {
    kernels::LayerNorm(rows, cols, x, gamma, beta, out, mean, rstd);
  }
  void LayerNormBackwardInput(int rows, int cols, const float* dout, const float* x, const float* gamma,
                              const float* mean, const float* rstd, float* dx, bool accumulate) override {
    kernels::LayerNormBackwardInput(rows, cols, dout, x, gamma, mean, rstd, dx, accumulate);
  }
  void LayerNormBackwardWeight(int rows, int cols, const float* dout, const float* x, const float* mean,
                               const float* rstd, float* dgamma, float* dbeta, bool accumulate) override {
    kernels::LayerNormBackwardWeight(rows, cols, dout, x, mean, rstd, dgamma, dbeta, accumulate);
  }
  void HeadsFromRows(int batch, int seq, int heads, int head_dim, const float* rows, int64_t ld, float* out) override {
    kernels::HeadsFromRows(batch, seq, heads, head_dim, rows, ld, out);
  }
  void RowsFromHeads(int batch, int seq, int heads, int head_dim, const float* in, float* rows, int64_t ld) override {
    kernels::RowsFromHeads(batch, seq, heads, head_dim, in, rows, ld);
  }
  void CausalSoftmax(int matrices, int seq, float* scores) override { kernels::CausalSoftmax(matrices, seq, scores); }
  void CausalSoftmaxBackward(int matrices, int seq, const float* p, float* dp) override {
    kernels::CausalSoftmaxBackward(matrices, seq, p, dp);
  }
  void Embedding(int batch, int seq, int cols, const float* tokens, const float* wte, const float* wpe,
                 float* out) override {
    kernels::Embedding(batch, seq, cols, tokens, wte, wpe, out);
  }
  void EmbeddingBackward(int batch, int seq, int cols, int vocab, const float* tokens, const float* dout, float* dwte,
                         float* dwpe, bool accumulate) override {
    kernels::EmbeddingBackward(batch, seq, cols, vocab, tokens, dout, dwte, dwpe, accumulate);
  }

  void Synchronize() override {}
  int Stamp() override {
    stamps_.push_back(NowNs());
    return static_cast<int>(stamps_.size()) - 1;
  }
  int64_t StampNs(int id) override { return stamps_.at(static_cast<size_t>(id)); }
  void ClearStamps() override { stamps_.clear(); }
  int64_t NowNs() override {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
 private:
  BlockPool free_;
  std::vector<int64_t> stamps_;
};

}  // namespace

std::unique_ptr<Device> MakeCpuDevice() { return std::make_unique<CpuDevice>(); }

int CoreForLocalRank(int local_rank, const std::vector<int>& cores, int ranks_per_device) {
  if (cores.empty() || local_rank < 0) return -1;
  const size_t device = static_cast<size_t>(local_rank / std::max(ranks_per_device, 1));
  return cores[device % cores.size()];
}

std::vector<int> AllowedCores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cores;
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return cores;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) cores.push_back(c);
  }
  return cores;
}

void PinToCore(int core) {
  if (core < 0 || core >= CPU_SETSIZE) throw std::runtime_error(fmt::format("no core {} to bind this rank to", core));
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(core, &set);
  if (sched_setaffinity(0, sizeof(set), &set) != 0) {
    throw std::runtime_error(fmt::format("cannot bind this rank to core {}: {}", core, std::strerror(errno)));
  }
}

}  // namespace stagecraft::exec
