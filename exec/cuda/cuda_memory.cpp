// CudaMemory (cuda_parts.h): the cuda device's memory part. Device memory with byte accounting,
// a peak and a pool (blocks kept for reuse by size, over a stream-ordered CUDA memory pool that
// keeps what is freed into it: no allocation synchronises the device), the blocks of graphs kept
// apart; page-locked host memory; copies within and between the tiers.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <utility>

#include "cuda_parts.h"
#include "keeping_pool.h"
#include "stagecraft/kernels/cuda.h"
#include "stagecraft/kernels/cuda_check.h"

namespace stagecraft::exec {
namespace {

size_t Bytes(int64_t floats) { return static_cast<size_t>(floats) * sizeof(float); }

cudaMemcpyKind CopyKind(MemoryTier dst, MemoryTier src) {
  if (dst == MemoryTier::kDevice) return src == MemoryTier::kDevice ? cudaMemcpyDeviceToDevice : cudaMemcpyHostToDevice;
  return src == MemoryTier::kDevice ? cudaMemcpyDeviceToHost : cudaMemcpyHostToHost;
}

}  // namespace

CudaMemory::CudaMemory(int gpu, CudaStreams& streams)
    : gpu_(gpu), stream_(streams.compute()), streams_(streams), pool_(MakeKeepingPool(gpu)) {}

CudaMemory::~CudaMemory() {
  host_free_.Drain([](float* block, int64_t) { (void)cudaFreeHost(block); });
  if (alloc_stream_ != nullptr) (void)cudaStreamDestroy(alloc_stream_);
  (void)cudaMemPoolDestroy(pool_);
}

float* CudaMemory::Allocate(int64_t floats, MemoryTier tier) {
  Admit(floats * static_cast<int64_t>(sizeof(float)), tier);
  if (tier == MemoryTier::kHost) {
    void* block = host_free_.Take(floats);
    if (block == nullptr) SC_CUDA_CHECK(cudaMallocHost(&block, Bytes(floats)));
    Track(floats * static_cast<int64_t>(sizeof(float)), MemoryTier::kHost);
    return static_cast<float*>(block);
  }
  if (floats == 0) return nullptr;
  float* block = capturing_ ? graph_free_.Take(floats) : nullptr;
  if (block == nullptr) block = free_.Take(floats);
  if (block == nullptr) {
    block = static_cast<float*>(DeviceMalloc(static_cast<uint64_t>(floats) * sizeof(float)));
    CountSystemAllocation();
  }
  if (capturing_) graph_blocks_.insert(block);
  Track(floats * static_cast<int64_t>(sizeof(float)));
  return block;
}

void CudaMemory::ReleaseGraphBlocks() {
  graph_free_.Drain([this](float* block, int64_t floats) { free_.Keep(block, floats); });
  graph_blocks_.clear();
  graphs_live_ = false;
  // Each retired workspace is let go of before its free is checked, so a failing free (a device
  // gone bad) leaves none to be freed twice by a later release or the exit's.
  auto retired = std::move(retired_workspaces_);
  retired_workspaces_.clear();
  cudaError_t first = cudaSuccess;
  for (const auto& [block, bytes] : retired) {
    const cudaError_t freed = cudaFreeAsync(block, stream_);  // after the launches queued before
    if (freed == cudaSuccess) Track(-bytes);
    if (first == cudaSuccess) first = freed;
  }
  SC_CUDA_CHECK(first);
}

// A freed buffer's 16-bit copy is dropped with it: the block may come back as any tensor.
void CudaMemory::Free(float* data, int64_t floats, MemoryTier tier) {
  Track(-floats * static_cast<int64_t>(sizeof(float)), tier);
  if (tier == MemoryTier::kHost) {
    host_free_.Keep(data, floats);  // page-locked memory is slow to get: kept for the next copy
    return;
  }
  if (data == nullptr) return;
  if (halves_ != nullptr) halves_->Freed(data, floats);
  if (capturing_) graph_blocks_.insert(data);  // the captured work uses it again at each launch
  (graph_blocks_.count(data) != 0 ? graph_free_ : free_).Keep(data, floats);
}

void CudaMemory::Upload(float* dst, const float* host, int64_t n) {
  if (n == 0) return;
  SC_CUDA_CHECK(cudaMemcpyAsync(dst, host, Bytes(n), cudaMemcpyHostToDevice, stream_));
  Wrote(dst, n);
  SC_CUDA_CHECK(cudaStreamSynchronize(stream_));  // the host buffer may go right after
}

void CudaMemory::Download(float* host, const float* src, int64_t n) {
  if (n == 0) return;
  SC_CUDA_CHECK(cudaMemcpyAsync(host, src, Bytes(n), cudaMemcpyDeviceToHost, stream_));
  SC_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

void CudaMemory::Copy(float* dst, const float* src, int64_t n) {
  if (n == 0) return;
  SC_CUDA_CHECK(cudaMemcpyAsync(dst, src, Bytes(n), cudaMemcpyDeviceToDevice, stream_));
  Wrote(dst, n);
}

void CudaMemory::Fill(float* dst, float value, int64_t n) {
  if (value == 0.0f && !std::signbit(value)) {
    if (n > 0) SC_CUDA_CHECK(cudaMemsetAsync(dst, 0, Bytes(n), stream_));
  } else {
    kernels::LaunchFill(n, value, dst, stream_);
  }
  Wrote(dst, n);
}

// On `stream` (a copy stream is made at its first use); the caller orders it against the
// compute stream. Device memory written this way is told to the 16-bit copies as any other write.
void CudaMemory::CopyAsync(float* dst, MemoryTier dst_tier, const float* src, MemoryTier src_tier, int64_t n,
                           StreamKind stream) {
  if (n == 0) return;
  SC_CUDA_CHECK(cudaMemcpyAsync(dst, src, Bytes(n), CopyKind(dst_tier, src_tier), streams_.Get(stream)));
  if (dst_tier == MemoryTier::kDevice) Wrote(dst, n);
}

// The kept blocks go back to the pool, stream-ordered as they came (nothing waits for the
// device): the next run's allocations of any size take them from there.
void CudaMemory::ReleaseCached() {
  if (halves_ != nullptr) halves_->ReleaseSpares();
  cudaError_t first = cudaSuccess;
  free_.Drain([&](float* block, int64_t) {
    const cudaError_t status = cudaFreeAsync(block, stream_);
    if (first == cudaSuccess) first = status;
  });
  if (first != cudaSuccess) kernels::ThrowCudaError(first, "cudaFreeAsync(kept block)", __FILE__, __LINE__);
  host_free_.Drain([&](float* block, int64_t) {
    const cudaError_t status = cudaFreeHost(block);
    if (first == cudaSuccess) first = status;
  });
  if (first != cudaSuccess) kernels::ThrowCudaError(first, "cudaFreeHost(kept block)", __FILE__, __LINE__);
}

// Grows the pool by `bytes` before the run: one allocation of them, freed at once, stays in
// the pool (its release threshold keeps everything). A hint: a device without room keeps
// what it has, and the run's own allocations say so if they fail.
void CudaMemory::Reserve(int64_t bytes) {
  if (bytes <= 0) return;
  void* block = nullptr;
  if (cudaMallocFromPoolAsync(&block, static_cast<size_t>(bytes), pool_, stream_) != cudaSuccess) {
    (void)cudaGetLastError();  // clear it: the device stays usable
    return;
  }
  SC_CUDA_CHECK(cudaFreeAsync(block, stream_));
}

// Grown stream-ordered: cudaFree would wait for the whole device, NCCL's streams included, and a
// receive posted ahead can wait on this very rank's next op (a deadlock --timeout cannot see).
void* CudaMemory::Workspace(int64_t bytes) {
  if (bytes > workspace_bytes_) {
    if (workspace_ != nullptr && graphs_live_) {
      // A free queued while capturing would be the graph's; after, a launch may still read it.
      retired_workspaces_.emplace_back(workspace_, workspace_bytes_);
      workspace_ = nullptr;
      workspace_bytes_ = 0;
    } else if (workspace_ != nullptr) {
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

void* CudaMemory::TakeOrdered(int64_t bytes) {
  void* block = DeviceMalloc(static_cast<uint64_t>(bytes));
  Track(bytes);
  CountSystemAllocation();
  return block;
}

int64_t CudaMemory::PoolReservedBytes() const {
  uint64_t bytes = 0;
  SC_CUDA_CHECK(cudaMemPoolGetAttribute(pool_, cudaMemPoolAttrReservedMemCurrent, &bytes));
  return static_cast<int64_t>(bytes);
}

void CudaMemory::FreeKeptAtExit() {
  free_.Drain([this](float* block, int64_t) { (void)cudaFreeAsync(block, stream_); });
}

void CudaMemory::FreeWorkspaceAtExit() {
  if (workspace_ != nullptr) (void)cudaFreeAsync(workspace_, stream_);
  for (const auto& [retired, bytes] : retired_workspaces_) (void)cudaFreeAsync(retired, stream_);
  retired_workspaces_.clear();
  workspace_ = nullptr;
}

// cudaMallocFromPoolAsync on the compute stream from the device's pool (freed with
// cudaFreeAsync there), with a full device reported as OutOfMemory (the runtime names the op);
// any other failure as the call that failed.
void* CudaMemory::DeviceMalloc(uint64_t bytes) {
  void* block = nullptr;
  if (capturing_ && alloc_stream_ == nullptr) {
    SC_CUDA_CHECK(cudaStreamCreateWithFlags(&alloc_stream_, cudaStreamNonBlocking));
  }
  const cudaStream_t on = capturing_ ? alloc_stream_ : stream_;
  const cudaError_t status = cudaMallocFromPoolAsync(&block, static_cast<size_t>(bytes), pool_, on);
  // Under capture the block comes from the pool's own stream, ready once that has run: any
  // stream may use it then.
  if (status == cudaSuccess && capturing_) SC_CUDA_CHECK(cudaStreamSynchronize(alloc_stream_));
  const char* call = "cudaMallocFromPoolAsync";
  if (status == cudaErrorMemoryAllocation) {
    (void)cudaGetLastError();  // clear it: the device stays usable
    size_t free_bytes = 0, total_bytes = 0;
    (void)cudaMemGetInfo(&free_bytes, &total_bytes);
    throw OutOfMemory(std::string(call) + " of " + std::to_string(bytes) + " bytes on GPU " + std::to_string(gpu_) +
                      " failed: out of memory (" + std::to_string(free_bytes) + " of " + std::to_string(total_bytes) +
                      " bytes free, " + std::to_string(bytes_in_use()) + " in use by this run)");
  }
  SC_CUDA_CHECK(status);
  return block;
}

}  // namespace stagecraft::exec
