// Which backend a command runs on (`--backend cpu|cuda|auto`), and the device and transport of
// each process for it (DESIGN.md §5):
//   cpu:  the cpu device (OpenBLAS, one thread) and MPI;
//   cuda: the GPU of the process's rank on its node (GpuForLocalRank); NCCL between the GPUs
//         (nccl_transport.h) when no two processes of a node share a GPU and the build has
//         NCCL, otherwise MPI through host buffers (staged_transport.h), which serves ranks
//         that share a GPU.
#pragma once

#include <chrono>
#include <memory>
#include <string_view>

#include "stagecraft/exec/device.h"
#include "stagecraft/exec/transport.h"
#include "stagecraft/sim/scenario.h"

namespace stagecraft::exec {

enum class Backend { kCpu, kCuda };

// `flag` is cpu, cuda or auto; auto is cuda when this process sees a CUDA device. Throws
// InputError when cuda is asked for and `cuda_devices` is 0 (or this build has no cuda backend).
Backend ChooseBackend(std::string_view flag, int cuda_devices, bool have_cuda_backend);

// The training.dtype a backend trains in: cpu fp32 only; cuda fp32, tf32, bf16 or fp16 (see
// cuda_plan.h). Throws InputError naming the scenario otherwise.
void CheckDtype(const sim::Scenario& scenario, Backend backend);

// Whether no node of the job has two processes on one GPU, this process being on `gpu` (-1:
// none), by the GPUs' bus ids (cuda_plan.h GpusAreDistinct). Collective; every rank gets the same
// answer, so one node that shares a GPU puts the whole job on host-staged MPI.
bool EveryProcessHasItsOwnGpu(int gpu);

struct ProcessRuntime {
  std::unique_ptr<Device> device;
  std::unique_ptr<Transport> transport;
};
// Requires a live MpiSession. Every wait of the transport gives up after `deadline`.
ProcessRuntime MakeProcessRuntime(Backend backend, const sim::Scenario& scenario,
                                  std::chrono::nanoseconds deadline = kDefaultWaitDeadline);

}  // namespace stagecraft::exec
