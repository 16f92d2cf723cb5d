// The cuda backend's device parts (device.h), each implemented in its own file and put
// together by CudaDevice (cuda_device.cpp): streams (cuda_streams.cpp), memory
// (cuda_memory.cpp), clock (cuda_clock.h) and the context its layer ops run with
// (cuda_op_context.cpp; the ops in cuda_layer_ops.cpp and cuda_linear_ops.cpp). Private to the
// cuda backend.
//
// Every part queues its work on the one compute stream (copies between tiers may go to a copy
// stream), so buffers freed to the pool, the workspace and the 16-bit weight copies are reused
// only by work queued after them.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <array>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <unordered_set>
#include <vector>

#include "cuda_clock.h"
#include "cuda_event_pool.h"
#include "cuda_lt.h"
#include "half_gemm_inputs.h"
#include "stagecraft/exec/block_pool.h"
#include "stagecraft/exec/cuda_plan.h"
#include "stagecraft/exec/device_clock.h"
#include "stagecraft/exec/device_memory.h"
#include "stagecraft/exec/device_streams.h"
#include "stagecraft/exec/layer_ops.h"
#include "stagecraft/kernels/cuda.h"

namespace stagecraft::exec {

// The compute stream (non-blocking, made with the part) and a copy stream per direction, made
// at their first use. OrderAfter records an event on the producer and queues the waiter's wait
// on it: no host wait.
class CudaStreams final : public DeviceStreams {
 public:
  CudaStreams();
  ~CudaStreams() override;
  CudaStreams(const CudaStreams&) = delete;
  CudaStreams& operator=(const CudaStreams&) = delete;

  void Synchronize(StreamKind stream) override;
  bool Idle(StreamKind stream) override;
  void OrderAfter(StreamKind waiter, StreamKind producer) override;
  void* Native(StreamKind stream) override { return Get(stream); }
  Fence MakeFence(StreamKind stream) override;
  bool FenceReached(Fence fence) override;
  void DropFence(Fence fence) override;

  cudaStream_t compute() const { return streams_[0]; }
  // The stream of `kind`, made now if it is a copy stream not used before.
  cudaStream_t Get(StreamKind kind);

 private:
  static size_t Index(StreamKind kind) { return static_cast<size_t>(kind); }

  std::array<cudaStream_t, 3> streams_{};  // by StreamKind; copy streams null until used
  CudaEventPool order_events_;
  CudaEventPool fence_events_;  // given back by DropFence
};

// Device memory comes stream-ordered from a memory pool of the device's own that keeps what is
// freed (cudaMallocFromPoolAsync on the compute stream): no allocation waits for the device,
// whose queue may hold NCCL kernels that wait on another rank. Blocks freed are kept for reuse
// by size. The host tier is page-locked (cudaMallocHost), its blocks kept likewise. Every write into device memory is told
// to the 16-bit weight copies, when the run has them (WatchWrites).
class CudaMemory final : public DeviceMemory {
 public:
  CudaMemory(int gpu, CudaStreams& streams);
  ~CudaMemory() override;  // destroys the pool: returns at once, the driver frees the rest when unused
  CudaMemory(const CudaMemory&) = delete;
  CudaMemory& operator=(const CudaMemory&) = delete;

  float* Allocate(int64_t floats, MemoryTier tier) override;
  void Free(float* data, int64_t floats, MemoryTier tier) override;
  void Upload(float* dst, const float* host, int64_t n) override;
  void Download(float* host, const float* src, int64_t n) override;
  void Copy(float* dst, const float* src, int64_t n) override;
  void Fill(float* dst, float value, int64_t n) override;
  void CopyAsync(float* dst, MemoryTier dst_tier, const float* src, MemoryTier src_tier, int64_t n,
                 StreamKind stream) override;
  void ReleaseCached() override;
  void Reserve(int64_t bytes) override;

  // The 16-bit weight copies to tell of writes and frees (null: none).
  void WatchWrites(HalfGemmInputs* halves) { halves_ = halves; }
  void Wrote(const float* data, int64_t floats) {
    if (halves_ != nullptr) halves_->Wrote(data, floats);
  }
  // Work memory of one call's kernels (the launchers' scratch, a GEMM's 16-bit inputs), grown
  // when a call needs more (counted as in use); only the compute stream uses it, call by call.
  void* Workspace(int64_t bytes);
  // Stream-ordered device memory counted as in use (the workspace, the 16-bit weight copies).
  void* TakeOrdered(int64_t bytes);
  void CountBytes(int64_t delta_bytes) { Track(delta_bytes); }
  int64_t PoolReservedBytes() const;
  // At the device's end, once the compute stream has drained: the kept blocks and the workspace
  // go back to the pool, stream-ordered, unchecked (a destructor must not throw).
  void FreeKeptAtExit();
  void FreeWorkspaceAtExit();

  // Graphs (device_graphs.h): while a capture is open, a block given out is the graphs' (so is
  // one kept from an earlier capture, taken first), and so is any block freed then (the captured
  // work still uses it at each launch); a freed one of theirs is kept apart, for the next capture
  // alone, until ReleaseGraphBlocks returns them all to the pool (the graphs are gone). What the
  // pool lacks then comes from a stream of its own, waited for: an allocation queued on the
  // capturing stream would become the graph's own. A workspace outgrown while graphs live is
  // kept until then too (they may read it).
  void SetCapturing(bool capturing) {
    capturing_ = capturing;
    graphs_live_ = graphs_live_ || capturing;
  }
  void ReleaseGraphBlocks();

 private:
  void* DeviceMalloc(uint64_t bytes);

  int gpu_;
  cudaStream_t stream_;  // the compute stream
  CudaStreams& streams_;
  cudaMemPool_t pool_ = nullptr;
  BlockPool free_;
  BlockPool host_free_;  // page-locked host-tier blocks, kept for reuse
  void* workspace_ = nullptr;
  int64_t workspace_bytes_ = 0;
  std::vector<std::pair<void*, int64_t>> retired_workspaces_;  // outgrown while graphs live, and bytes
  HalfGemmInputs* halves_ = nullptr;
  bool capturing_ = false;
  bool graphs_live_ = false;  // from a capture until ReleaseGraphBlocks
  std::unordered_set<const float*> graph_blocks_;
  BlockPool graph_free_;
  cudaStream_t alloc_stream_ = nullptr;  // made at the first allocation under capture
};

// What the cuda layer ops run with: the compute stream, cuBLAS (on that stream, host pointer
// mode), the GEMM precision, the memory's workspace and, in bf16 and fp16 runs, the 16-bit
// weight copies. Every op says what it wrote (Wrote) so that a stale copy is rounded again; an
// optimizer's update refreshes the copy of the weights it wrote (UpdatedWeights).
class CudaOpContext final : public OpContext {
 public:
  CudaOpContext(cudaStream_t compute, GemmPrecision precision, CudaMemory& memory);
  ~CudaOpContext() override;  // cuBLAS is left to DestroyBlasAtExit (it may wait for the whole device)
  CudaOpContext(const CudaOpContext&) = delete;
  CudaOpContext& operator=(const CudaOpContext&) = delete;

  cudaStream_t stream() const { return stream_; }
  cublasHandle_t blas() const { return blas_; }
  CudaLt& lt() { return *lt_; }
  const CudaLt& lt() const { return *lt_; }
  GemmPrecision precision() const { return precision_; }
  HalfGemmInputs* halves() { return halves_ ? &*halves_ : nullptr; }

  kernels::ScratchSpan FloatScratch(int64_t floats);
  struct Written {
    const float* data;
    int64_t floats;
  };
  void Wrote(const float* data, int64_t floats) { memory_.Wrote(data, floats); }
  void Wrote(std::initializer_list<Written> spans) {
    for (const Written& span : spans) Wrote(span.data, span.floats);
  }
  void UpdatedWeights(const float* w, int64_t n) {
    if (halves_) halves_->Updated(w, n);
  }

  // Before a graph capture: cuBLAS works in cuBLASLt's fixed workspace (the two run one call at a
  // time on the one stream) rather than in one it would allocate inside the graph.
  void PrepareForCapture();

  // At the device's end: the 16-bit copies and cuBLASLt's memory go (stream-ordered), then
  // cuBLAS and cuBLASLt once the stream drained.
  void ReleaseHalvesAtExit();
  void DestroyBlasAtExit();

 private:
  cudaStream_t stream_;
  GemmPrecision precision_;
  CudaMemory& memory_;
  cublasHandle_t blas_ = nullptr;
  std::optional<CudaLt> lt_;
  std::optional<HalfGemmInputs> halves_;  // bf16 and fp16 runs only
  bool blas_in_lt_workspace_ = false;
};

// The graphs part (device_graphs.h, cuda_graphs.cpp): stream capture of the compute stream, each
// segment instantiated twice (the clone's stamps retargeted to the second instance's events), the
// memory and the stamps set to capture while a capture is open.
class CudaGraphs final : public DeviceGraphs {
 public:
  CudaGraphs(cudaStream_t compute, EventStamps& stamps, CudaMemory& memory, CudaOpContext& context)
      : stream_(compute), stamps_(stamps), memory_(memory), context_(context) {}
  ~CudaGraphs() override;  // best effort: the device drains its stream first
  CudaGraphs(const CudaGraphs&) = delete;
  CudaGraphs& operator=(const CudaGraphs&) = delete;

  void BeginCapture() override;
  int EndCapture() override;
  void AbandonCapture() noexcept override;
  bool capturing() const override { return capturing_; }
  void Launch(int segment, int instance) override;
  void Release() override;
  int segments() const override { return static_cast<int>(execs_.size()); }

 private:
  using Instances = std::array<cudaGraphExec_t, kInstances>;
  void Capturing(bool on);
  static void Destroy(Instances* instances);

  cudaStream_t stream_;
  EventStamps& stamps_;
  CudaMemory& memory_;
  CudaOpContext& context_;
  std::vector<Instances> execs_;
  bool capturing_ = false;
};

// The matrix products and the fused linear layer of the cuda column (cuda_linear_ops.cpp), for
// CudaLayerOps.
LinearOps CudaLinearOps();
FusedLinearOps CudaFusedLinearOps();

}  // namespace stagecraft::exec
