// Device: where tensors live and math runs (DESIGN.md §5). The runtime only talks to this
// interface; the cpu backend implements it with OpenBLAS and the kernels/ host loops, a cuda
// backend with cuBLAS and the kernels/ launchers. All tensors are fp32, row-major.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>

#include "stagecraft/kernels/host.h"

namespace stagecraft::exec {

// An allocation the device could not satisfy (its memory is full). The runtime prefixes the op
// it was running; the job then ends like any other rank failure.
class OutOfMemory : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class Device {
 public:
  virtual ~Device() = default;
  virtual std::string Name() const = 0;

  // Memory. Allocate never returns null (throws OutOfMemory when memory is exhausted). Bytes in use are tracked so the
  // executor can report measured peak memory. Freed blocks are kept for reuse by size, so a
  // run whose buffers repeat every microbatch allocates nothing from the system once warm;
  // system_allocations() counts the blocks really obtained (tests check the steady state).
  virtual float* Allocate(int64_t floats) = 0;
  virtual void Free(float* data, int64_t floats) = 0;
  virtual void Upload(float* dst, const float* host, int64_t n) = 0;
  virtual void Download(float* host, const float* src, int64_t n) = 0;
  virtual void Copy(float* dst, const float* src, int64_t n) = 0;
  virtual void Fill(float* dst, float value, int64_t n) = 0;
  // Host memory that a transport stages this device's data through (staged_transport.h):
  // page-locked where that lets the device copy faster (cuda), ordinary memory otherwise.
  virtual float* AllocateHost(int64_t floats) { return new float[static_cast<size_t>(floats)]; }
  virtual void FreeHost(float* data, int64_t /*floats*/) { delete[] data; }
  int64_t bytes_in_use() const { return bytes_in_use_; }
  int64_t system_allocations() const { return system_allocations_; }
  int64_t peak_bytes() const { return peak_bytes_; }
  void ResetPeak() { peak_bytes_ = bytes_in_use_; }

  // c[m x n] = alpha · op(a) · op(b) + beta · c, op(x) = xᵀ when trans_x; a is [m x k] after
  // op, b is [k x n] after op; all row-major and densely packed.
  virtual void Gemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, const float* b,
                    float beta, float* c) = 0;
  // y += alpha · x.
  virtual void Axpy(int64_t n, float alpha, const float* x, float* y) = 0;

  // The kernels/ math (see kernels/host.h for each contract).
  virtual void BiasActivation(kernels::Activation act, int rows, int cols, float* z, const float* bias,
                              const float* residual, float* out) = 0;
  virtual void ActivationBackward(kernels::Activation act, int64_t n, const float* dout, const float* z,
                                  float* dz) = 0;
  virtual void BiasGrad(int rows, int cols, const float* dz, float* bias_grad, bool accumulate) = 0;
  // Writes dy (times loss_scale, TrainingConfig::loss_scale) and the microbatch's mean loss into
  // *loss (one float of device memory) without waiting for it: the runtime reads a step's losses
  // back once.
  virtual void Loss(kernels::LossKind kind, int rows, int cols, const float* y, const float* targets, float* dy,
                    float* loss, float loss_scale) = 0;
  virtual void SgdMomentum(int64_t n, const float* w_in, float* w_out, float* velocity, float* grad,
                           float grad_scale, float lr, float momentum) = 0;
  virtual void Adam(int64_t n, const float* w_in, float* w_out, float* m, float* v, float* grad, float grad_scale,
                    const kernels::AdamParams& params) = 0;

  // The transformer's math (kernels/host.h for each contract). GemmBatched is `batch` Gemms
  // with the same shapes, matrix i of a, b and c starting stride_x floats after matrix i − 1.
  virtual void GemmBatched(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a,
                           int64_t stride_a, const float* b, int64_t stride_b, float beta, float* c, int64_t stride_c,
                           int batch) = 0;
  virtual void BiasAdd(int rows, int cols, float* x, const float* bias, const float* residual) = 0;
  virtual void LayerNorm(int rows, int cols, const float* x, const float* gamma, const float* beta, float* out,
                         float* mean, float* rstd) = 0;
  virtual void LayerNormBackwardInput(int rows, int cols, const float* dout, const float* x, const float* gamma,
                                      const float* mean, const float* rstd, float* dx, bool accumulate) = 0;
  virtual void LayerNormBackwardWeight(int rows, int cols, const float* dout, const float* x, const float* mean,
                                       const float* rstd, float* dgamma, float* dbeta, bool accumulate) = 0;
  virtual void HeadsFromRows(int batch, int seq, int heads, int head_dim, const float* rows, int64_t ld,
                             float* out) = 0;
  virtual void RowsFromHeads(int batch, int seq, int heads, int head_dim, const float* in, float* rows,
                             int64_t ld) = 0;
  virtual void CausalSoftmax(int matrices, int seq, float* scores) = 0;
  virtual void CausalSoftmaxBackward(int matrices, int seq, const float* p, float* dp) = 0;
  virtual void Embedding(int batch, int seq, int cols, const float* tokens, const float* wte, const float* wpe,
                         float* out) = 0;
  virtual void EmbeddingBackward(int batch, int seq, int cols, int vocab, const float* tokens, const float* dout,
                                 float* dwte, float* dwpe, bool accumulate) = 0;

  // Waits for all queued work.
  virtual void Synchronize() = 0;
  // Gives the blocks kept for reuse back to the system, between runs (no transfer in flight):
  // one schedule's sizes would otherwise stay held while the next needs others. The cpu device
  // hands them back to its heap, which keeps their pages for the next run.
  virtual void ReleaseCached() {}
  // Before a run, outside its clock: makes the next `bytes` of allocations find memory the
  // system has already handed over, so that a run's first step pays no cost its later steps do
  // not. The cpu device faults the pages in (a fresh page costs a fault and its zeroing at first
  // touch, about 20 ms for 20 MiB); a hint, and a no-op where memory has no such first cost.
  virtual void Reserve(int64_t /*bytes*/) {}
  // A host clock shared by every op of the run (steady, ns).
  virtual int64_t NowNs() = 0;
  // Op times with no wait per op: Stamp() marks the device's queue after the work queued so far
  // and returns the mark's id (0, 1, ... since the last ClearStamps); StampNs(id) is when the
  // device reached the mark, on NowNs()'s clock, waiting for it if it has not yet. A device
  // that runs each call to completion (cpu) reads its clock at Stamp().
  virtual int Stamp() = 0;
  virtual int64_t StampNs(int id) = 0;
  virtual void ClearStamps() = 0;
  // Whether the device has reached stamp `id`, so that StampNs(id) would not wait; asks without
  // waiting (a caller polls it under a deadline). A device that runs each call to completion
  // (cpu) always has.
  virtual bool Reached(int /*id*/) { return true; }

 protected:
  void Track(int64_t delta_bytes) {
    bytes_in_use_ += delta_bytes;
    if (bytes_in_use_ > peak_bytes_) peak_bytes_ = bytes_in_use_;
  }
  void CountSystemAllocation() { ++system_allocations_; }

 private:
  int64_t bytes_in_use_ = 0;
  int64_t system_allocations_ = 0;
  int64_t peak_bytes_ = 0;
};

// An owned device tensor of `size` floats; move-only, freed through its device.
class Buffer {
 public:
  Buffer() = default;
  Buffer(Device& device, int64_t size) : device_(&device), data_(device.Allocate(size)), size_(size) {}
  Buffer(Buffer&& other) noexcept { *this = std::move(other); }
  Buffer& operator=(Buffer&& other) noexcept {
    if (this != &other) {
      Reset();
      device_ = std::exchange(other.device_, nullptr);
      data_ = std::exchange(other.data_, nullptr);
      size_ = std::exchange(other.size_, 0);
    }
    return *this;
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer() { Reset(); }

  void Reset() {
    if (data_ != nullptr) device_->Free(data_, size_);
    data_ = nullptr;
    size_ = 0;
  }
  float* data() { return data_; }
  const float* data() const { return data_; }
  int64_t size() const { return size_; }
  bool empty() const { return data_ == nullptr; }

 private:
  Device* device_ = nullptr;
  float* data_ = nullptr;
  int64_t size_ = 0;
};

}  // namespace stagecraft::exec
