// HalfGemmInputs: the 16-bit inputs of the cuda device's bf16/fp16 GEMMs (private to
// cuda_device.cpp). A weight buffer that an optimizer update wrote keeps a 16-bit copy
// (half_weight_copies.h), refreshed by each update of it; any other write into it makes the copy
// stale, and a GEMM that reads a stale copy rounds the whole buffer again first; freeing the
// buffer drops its copy. Every other GEMM input is rounded into the device's workspace at each
// GEMM. All of it is queued on the device's compute stream in call order, so a GEMM reads a copy
// made after the last write queued before it.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

#include "stagecraft/exec/half_weight_copies.h"
#include "stagecraft/kernels/cuda.h"
#include "stagecraft/kernels/cuda_check.h"

namespace stagecraft::exec {

class HalfGemmInputs {
 public:
  // What the device lends: `allocate(bytes)` stream-ordered memory counted as in use (throws
  // OutOfMemory when full); `count(delta_bytes)` moves that count; `workspace(bytes)` the
  // device's per-call work memory.
  struct Memory {
    std::function<void*(int64_t)> allocate;
    std::function<void(int64_t)> count;
    std::function<void*(int64_t)> workspace;
  };
  struct Operands {
    const void* first;   // b's values
    const void* second;  // a's
  };

  HalfGemmInputs(kernels::HalfFormat format, cudaStream_t stream, Memory memory)
      : format_(format), stream_(stream), memory_(std::move(memory)) {}
  HalfGemmInputs(const HalfGemmInputs&) = delete;
  HalfGemmInputs& operator=(const HalfGemmInputs&) = delete;
  // Best effort, stream-ordered: the device synchronizes its stream afterwards.
  ~HalfGemmInputs() {
    for (const HalfWeightCopies::Copy& copy : copies_.ForgetAll()) (void)cudaFreeAsync(copy.halves, stream_);
    for (const Spare& spare : spares_) (void)cudaFreeAsync(spare.halves, stream_);
  }

  // Something wrote [data, data + floats) (a stale copy is rounded again at its next read).
  void Wrote(const float* data, int64_t floats) {
    if (!copies_.empty()) copies_.Written(data, floats);
  }
  // [data, data + floats) was freed: its copy's memory is kept for the next copy of that size.
  void Freed(const float* data, int64_t floats) {
    if (copies_.empty()) return;
    for (const HalfWeightCopies::Copy& copy : copies_.Forget(data, floats)) {
      memory_.count(-Bytes(copy.floats));
      spares_.push_back({copy.halves, copy.floats});
    }
  }
  // An optimizer wrote the weight buffer [w, w + n): its copy, made on its first update, is
  // rounded now.
  void Updated(const float* w, int64_t n) {
    if (n <= 0) return;
    HalfWeightCopies::Copy* copy = copies_.Of(w, n);
    if (copy == nullptr) {
      Freed(w, n);  // copies of other extents overlapping it (the runtime makes none)
      copy = &copies_.Add(w, n, Take(n));
    }
    kernels::LaunchToHalf(format_, n, w, copy->halves, stream_);
    copy->current = true;
  }
  // b's span and a's span in 16 bits: from the weight copies that hold them, the others rounded
  // into the workspace (b first, a after it on a 16-byte boundary, which cuBLAS's tensor-core
  // kernels prefer).
  Operands Round(const float* b, int64_t b_span, const float* a, int64_t a_span) {
    const uint16_t* b_halves = Cached(b, b_span);
    const uint16_t* a_halves = Cached(a, a_span);
    const int64_t a_at = b_halves != nullptr ? 0 : (b_span + 7) / 8 * 8;
    const int64_t halves = a_at + (a_halves != nullptr ? 0 : a_span);
    if (halves > 0) {
      auto* work = static_cast<uint16_t*>(memory_.workspace(Bytes(halves)));
      if (b_halves == nullptr) {
        kernels::LaunchToHalf(format_, b_span, b, work, stream_);
        b_halves = work;
      }
      if (a_halves == nullptr) {
        kernels::LaunchToHalf(format_, a_span, a, work + a_at, stream_);
        a_halves = work + a_at;
      }
    }
    return Operands{b_halves, a_halves};
  }
  // Between runs: the spare copies' memory goes back (stream-ordered, as it came).
  void ReleaseSpares() {
    for (const Spare& spare : std::exchange(spares_, {})) SC_CUDA_CHECK(cudaFreeAsync(spare.halves, stream_));
  }

  size_t copies() const { return copies_.size(); }

 private:
  struct Spare {
    void* halves;
    int64_t floats;
  };

  static int64_t Bytes(int64_t halves) { return halves * static_cast<int64_t>(sizeof(uint16_t)); }

  // [data, data + floats) from the copy of the buffer holding it, rounded again first if stale;
  // null when no copy holds it.
  const uint16_t* Cached(const float* data, int64_t floats) {
    HalfWeightCopies::Copy* copy = copies_.Holding(data, floats);
    if (copy == nullptr) return nullptr;
    if (!copy->current) {
      kernels::LaunchToHalf(format_, copy->floats, copy->base, copy->halves, stream_);
      copy->current = true;
    }
    return static_cast<const uint16_t*>(copy->halves) + (data - copy->base);
  }
  // Memory for a copy of n floats, counted as in use: a spare of that size (weight versions all
  // have one), else a new allocation.
  void* Take(int64_t n) {
    for (auto it = spares_.begin(); it != spares_.end(); ++it) {
      if (it->floats == n) {
        void* halves = it->halves;
        spares_.erase(it);
        memory_.count(Bytes(n));
        return halves;
      }
    }
    return memory_.allocate(Bytes(n));
  }

  kernels::HalfFormat format_;
  cudaStream_t stream_;
  Memory memory_;
  HalfWeightCopies copies_;
  std::vector<Spare> spares_;
};

}  // namespace stagecraft::exec
