// Which backend a command runs on (`--backend cpu|cuda|auto`), and the device and transport of
// each process for it (DESIGN.md §5):
//   cpu:  the cpu device (OpenBLAS, one thread) and MPI;
//   cuda: the GPU of the process's rank on its node (GpuForLocalRank); NCCL between the GPUs
//         (nccl_transport.h) when no two processes of a node share a GPU and the build has
//         NCCL, otherwise MPI through host buffers (staged_transport.h), which serves ranks
//         that share a GPU.
//
// Start-up is collective and cannot hang: the parts that only a rank's own machine can fail
// (its GPU, the replicas' NCCL communicator) each end in an agreement over MPI, so every rank
// learns of a failure anywhere and the job ends with its cause on one line (MakeProcessRuntime).
// The pipeline's NCCL channels are made later, for the routes each run sends over
// (Transport::Prepare), every wait under the deadline.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "stagecraft/exec/device.h"
#include "stagecraft/exec/devices.h"
#include "stagecraft/exec/replica_group.h"
#include "stagecraft/exec/transport.h"
#include "stagecraft/scenario/scenario.h"

namespace stagecraft::exec {

enum class Backend { kCpu, kCuda };

// `flag` is cpu, cuda or auto, judged by `devices` (JudgeDevices(ProbeCuda(false))): auto is cuda
// when the cuda backend is usable here and cpu when this machine has no GPU or this build no
// cuda backend. Throws InputError naming the reason when cuda is asked for and is not usable,
// and when auto meets a GPU that this build cannot use (running on the CPU would hide that).
Backend ChooseBackend(std::string_view flag, const DevicesVerdict& devices);

// The training.dtype a backend trains in: cpu fp32 only; cuda fp32, tf32, bf16 or fp16 (see
// cuda_plan.h). Throws InputError naming the scenario otherwise.
void CheckDtype(const sim::Scenario& scenario, Backend backend);

// Whether no node of the job has two processes on one GPU, this process being on `gpu` (-1:
// none), by the GPUs' bus ids (cuda_plan.h GpusAreDistinct). Collective; every rank gets the same
// answer, so one node that shares a GPU puts the whole job on host-staged MPI.
bool EveryProcessHasItsOwnGpu(int gpu);

struct ProcessRuntime {
  std::unique_ptr<Device> device;
  // The pipeline's ranks: the whole job, or with data parallelism this process's replica
  // (replica_group.h WorldLayout), so that rank() is the pipeline rank either way.
  std::unique_ptr<Transport> transport;
  // With data parallelism (StartupOptions::data_parallel > 1), this pipeline rank's replicas;
  // null otherwise.
  std::unique_ptr<ReplicaGroup> replicas;
};

// The steps of start-up that can fail on one rank alone.
enum class StartupStep {
  kDevice,     // the process's device (its GPU: cudaSetDevice, cuBLAS, streams)
  kTransport,  // the transport over the MPI one made before (NCCL's or host staging; the replicas' communicator)
};
std::string_view StartupStepName(StartupStep step);

struct StartupOptions {
  // Every wait of the transport, and each agreement, gives up after this.
  std::chrono::nanoseconds deadline = kDefaultWaitDeadline;
  // Called on every rank as each step begins, inside the step: what it throws fails the step on
  // that rank. Tests inject start-up faults through it; empty: nothing.
  std::function<void(StartupStep)> on_step;
  // Prints one line of a failure's cause (without a trailing newline).
  std::function<void(const std::string& line)> report;
  // D: the job runs D replicas of a pipeline of (job size) / D ranks (replica_group.h
  // WorldLayout). The cuda backend runs replicas over NCCL only (every process its own GPU).
  int data_parallel = 1;
};

// Start-up failed and every rank knows: its cause is reported (by rank 0, once for the job).
// The command exits non-zero on every rank, with nothing more to print.
class StartupFailed : public std::runtime_error {
 public:
  StartupFailed() : std::runtime_error("start-up failed on some rank (reported)") {}
};

// Requires a live MpiSession; collective. First what cannot fail on one rank alone: the MPI
// transports and each process's place on its node. Then each StartupStep runs on every rank and
// the ranks agree (an MPI_Iallreduce under the deadline) before any goes on. When a step failed
// anywhere, rank 0 reports one line per distinct cause (StartupFailureLines) and every rank
// throws StartupFailed. When the agreement cannot complete (a peer hung inside the step, e.g.
// in ncclCommInitRank waiting for this failed rank), this rank reports its own cause, or the
// wait, and ends the job through Transport::Abort: it does not return.
ProcessRuntime MakeProcessRuntime(Backend backend, const sim::Scenario& scenario, const StartupOptions& options = {});

// One line per distinct cause among the ranks' `errors` (indexed by rank, empty where the
// step succeeded), naming the ranks that had it and their hosts (`hosts`, by rank), in order of
// the first rank with each: "rank 1 (node7): CAUSE", "ranks 0, 1 (node7): CAUSE".
std::vector<std::string> StartupFailureLines(const std::vector<std::string>& errors,
                                             const std::vector<std::string>& hosts);

}  // namespace stagecraft::exec
