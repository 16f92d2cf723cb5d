// The cuda backend's Device (DESIGN.md §5), in parts (exec/cuda/cuda_parts.h): memory with byte
// accounting per tier, a peak and a pool (blocks kept for reuse by size, over a stream-ordered
// CUDA memory pool that keeps what is freed into it: no allocation synchronises the device), and
// page-locked host memory; streams: one compute stream per process and a copy stream per
// direction, made at first use; the clock: op times from CUDA events, read back when the runtime
// resolves its stamps (once per step; Reached asks without waiting); and the cuda column of the
// layer op table: cuBLAS GEMMs in the run's GemmPrecision and the kernels/ launchers for the
// element-wise math, the loss and the optimizers. Built when the CUDA toolkit is found; without
// it CudaDeviceCount() is 0 and MakeCudaDevice throws.
//
// 16-bit weights (bf16, fp16): a buffer that SgdMomentum or Adam writes as w_out is a weight
// buffer; it gets a 16-bit copy (2 bytes a float, counted in bytes_in_use) that each such update
// rounds again right after it, and GEMMs read any operand lying inside it from the copy rather
// than rounding it per call. Every other call of the device that writes device memory (Upload,
// Copy, Fill, CopyAsync into the device tier, axpy, a GEMM's output, every kernel's outputs)
// marks the copies it overlaps stale, and the next GEMM to read one rounds the whole buffer again
// first; Free drops the copy with its buffer. So a GEMM never reads a copy older than a write
// made through this device. Memory written by anything else (a transport's receive on its own
// stream, a kernel launched on the raw pointer) is not seen: such a writer must not write into a
// weight buffer while it is allocated (the runtime never does: it receives only into activation
// and gradient buffers).
//
// Module loading: the first of CudaDeviceCount, CudaPciBusId and MakeCudaDevice sets
// CUDA_MODULE_LOADING=EAGER unless the environment names a mode (kernels/cuda.h), and
// MakeCudaDevice loads every kernels/ kernel up front: a kernel loaded lazily while an NCCL
// receive spins on another stream can deadlock the rank.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "stagecraft/exec/cuda_plan.h"
#include "stagecraft/exec/device.h"

namespace stagecraft::exec {

// Whether this build has the cuda backend.
bool HaveCudaBackend();
// The CUDA devices this process sees: 0 without a CUDA build, a driver or a device.
int CudaDeviceCount();
// The Device on GPU `gpu` (made current for this process); throws std::runtime_error naming
// the host, the call, file:line and CUDA's message when it cannot be made.
std::unique_ptr<Device> MakeCudaDevice(int gpu, GemmPrecision precision);
// The PCI bus id of GPU `gpu` as this process sees it ("0000:3b:00.0"): the same GPU has the
// same id in every process, whatever CUDA_VISIBLE_DEVICES numbered it. Empty without a cuda
// build or a GPU (gpu < 0, GpuForLocalRank's "none").
std::string CudaPciBusId(int gpu);
// The compute stream (a cudaStream_t) of a device made by MakeCudaDevice, for a transport that
// orders its own stream against it; throws std::invalid_argument for any other device.
void* CudaComputeStream(Device& device);
// When `event` (a cudaEvent_t made with timing, recorded on any stream of `device`, a device made
// by MakeCudaDevice, and complete) completed, on device.clock().NowNs()'s clock, through the
// origin its op stamps are read on: a transport's transfer and a collective are timed on the same
// clock as the compute beside them. Throws std::invalid_argument for any other device.
int64_t CudaEventNs(Device& device, void* event);
// A stamp of `device`'s clock (DeviceClock::Stamp's ids, StampNs reads it) recorded on `stream`
// (a cudaStream_t of the same device): while the compute stream is captured, a graph stamp
// (device_graphs.h) of a stream the capture has forked, recorded at each launch: a transfer
// recorded into a step graph is timed by it. Throws std::invalid_argument for any other device.
int CudaStampOn(Device& device, void* stream);
// The bytes the device's memory pool holds from the driver now (cudaMemPoolAttrReservedMemCurrent):
// what the process really takes, beside the bytes of live tensors its peak counts. Throws
// std::invalid_argument for a device not made by MakeCudaDevice.
int64_t CudaPoolReservedBytes(Device& device);
// How many fused linear ops of a device made by MakeCudaDevice ran as one cuBLASLt call
// (LayerOps::fused_linear; the rest ran unfused). Throws std::invalid_argument for any other device.
int64_t CudaFusedCalls(Device& device);

}  // namespace stagecraft::exec
