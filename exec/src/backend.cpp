// Backend choice and the per-process device and transport, made in steps that every rank
// agrees on before any goes on (backend.h).
#include "stagecraft/exec/backend.h"

#include <algorithm>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "stagecraft/base/check.h"
#include "stagecraft/base/error.h"
#include "stagecraft/exec/cpu_device.h"
#include "stagecraft/exec/cuda_device.h"
#include "stagecraft/exec/mpi_transport.h"
#include "stagecraft/exec/nccl_transport.h"
#include "stagecraft/exec/staged_transport.h"

namespace stagecraft::exec {

namespace {

// A step's failure on this rank, as the report names it.
std::string StepError(StartupStep step, std::string_view what) {
  return fmt::format("start-up failed {}: {}", StartupStepName(step), what);
}

void Report(const StartupOptions& o, const std::string& line) {
  if (o.report) o.report(line);
}

// Runs `work` as `step` on this rank, then agrees with every rank on whether it succeeded
// everywhere (see MakeProcessRuntime).
template <typename Work>
void AgreedStep(Transport& control, const StartupOptions& o, StartupStep step, Work&& work) {
  std::string error;
  try {
    if (o.on_step) o.on_step(step);
    work();
  } catch (const std::exception& e) {
    error = StepError(step, e.what());
  } catch (...) {  // whatever a step throws, this rank must still reach the agreement
    error = StepError(step, "an exception that is not a std::exception");
  }
  const std::string me = fmt::format("rank {} ({})", control.rank(), HostName());
  std::vector<std::string> gathered;
  try {
    if (control.EveryRank(error.empty())) return;
    // Every rank is here and one failed: each sends its host and its error, if any.
    gathered = control.Gather(error.empty() ? std::string() : HostName() + '\n' + error, 0);
  } catch (const std::exception& e) {
    // A peer did not come (hung inside this step) or MPI failed: this rank speaks for itself.
    Report(o, error.empty() ? fmt::format("{}: start-up: waiting for the other ranks to finish {}: {}", me,
                                          StartupStepName(step), e.what())
                            : fmt::format("{}: {}", me, error));
    control.Abort(1);
  }
  if (control.rank() == 0) {
    std::vector<std::string> errors, hosts;
    for (const std::string& g : gathered) {
      const size_t cut = g.find('\n');
      hosts.push_back(cut == std::string::npos ? std::string() : g.substr(0, cut));
      errors.push_back(cut == std::string::npos ? g : g.substr(cut + 1));
    }
    for (const std::string& line : StartupFailureLines(errors, hosts)) Report(o, line);
  }
  throw StartupFailed();
}

ProcessRuntime MakeCudaRuntime(const sim::Scenario& sc, const StartupOptions& o, Transport& control,
                               std::unique_ptr<Transport> host, std::unique_ptr<ReplicaGroup> replicas) {
  ProcessRuntime rt;
  const GemmPrecision precision =
      GemmPrecisionFor(sim::Name(sc.training.dtype)).value_or(GemmPrecision::kFp32);
  const int local_rank = MpiLocalRank();  // collective: before any step
  std::string bus_id;
  AgreedStep(control, o, StartupStep::kDevice, [&] {
    const int gpu = GpuForLocalRank(local_rank, CudaDeviceCount(), sc.pipeline.ranks_per_device);
    rt.device = MakeCudaDevice(gpu, precision);
    bus_id = CudaPciBusId(gpu);
  });
  // Collective, and nothing in it can fail on one rank alone: every rank has its GPU now.
  const bool nccl = HaveNccl() && MpiOnEveryRank(GpusAreDistinct(MpiGatherOnNode(bus_id)));
  AgreedStep(control, o, StartupStep::kTransport, [&] {
    rt.transport = nccl ? MakeNcclTransport(std::move(host), *rt.device, o.deadline)
                        : MakeStagedTransport(std::move(host), *rt.device);
    if (!replicas) return;
    // The MPI group reads its buffers in host memory; GPU memory takes NCCL.
    if (!nccl) throw std::runtime_error("data-parallel replicas on the cuda backend need NCCL and a GPU per process");
    rt.replicas = MakeNcclReplicaGroup(std::move(replicas), *rt.device, o.deadline);
  });
  return rt;
}

}  // namespace

Backend ChooseBackend(std::string_view flag, const DevicesVerdict& devices) {
  if (flag == "cpu") return Backend::kCpu;
  const bool usable = devices.status == DevicesStatus::kUsable;
  if (flag == "auto") {
    if (usable) return Backend::kCuda;
    if (devices.status != DevicesStatus::kUnusable) return Backend::kCpu;
    throw InputError(fmt::format("--backend auto: this machine has a GPU that this build cannot use: {} "
                                 "(--backend cpu runs on the CPU; stagecraft devices says more)",
                                 devices.reason));
  }
  if (flag != "cuda") throw InputError(fmt::format("--backend: expected cpu, cuda or auto, got '{}'", flag));
  if (!usable) throw InputError(fmt::format("--backend cuda: {}", devices.reason));
  return Backend::kCuda;
}

void CheckDtype(const sim::Scenario& sc, Backend backend) {
  if (!sc.has_training) return;  // not executable at all; TrainingConfigFor names why
  if (sc.training.fp8) {
    throw InputError(fmt::format("{}: training.fp8: the executor runs its GEMMs at training.dtype (FP8 is "
                                 "simulated only)", sc.path));
  }
  const std::string_view dtype = sim::Name(sc.training.dtype);
  if (backend == Backend::kCpu && dtype != "fp32") {
    throw InputError(fmt::format("{}: training.dtype: the cpu executor trains in fp32, got {}", sc.path, dtype));
  }
  if (backend == Backend::kCuda && !GemmPrecisionFor(dtype)) {
    throw InputError(
        fmt::format("{}: training.dtype: the cuda executor trains in fp32, tf32, bf16 or fp16, got {}", sc.path, dtype));
  }
}

bool EveryProcessHasItsOwnGpu(int gpu) {
  return MpiOnEveryRank(GpusAreDistinct(MpiGatherOnNode(CudaPciBusId(gpu))));
}

std::string_view StartupStepName(StartupStep step) {
  switch (step) {
    case StartupStep::kDevice: return "making the device";
    case StartupStep::kTransport: return "connecting the ranks";
  }
  return "?";
}

ProcessRuntime MakeProcessRuntime(Backend backend, const sim::Scenario& sc, const StartupOptions& o) {
  // Collective first: the agreements' transport over the world, then the groups split from it
  // that the run's transport and collectives build on. With replicas, each replica's pipeline is
  // a part of the world, and each pipeline rank's replicas another (every rank makes both, in
  // this order); without, the pipeline is the world.
  const MpiGroup world = MpiGroup::World();
  const std::unique_ptr<Transport> control = MakeMpiTransport(world, o.deadline);
  const WorldLayout layout{control->size() / std::max(o.data_parallel, 1), std::max(o.data_parallel, 1)};
  SC_CHECK(layout.world() == control->size(), "a job of pipeline ranks x replicas (checked when planned)");
  const int me = control->rank();
  const MpiGroup pipeline = layout.replicas > 1 ? world.Split(PipelineKey(layout, me)) : world;
  std::unique_ptr<Transport> host = MakeMpiTransport(pipeline, o.deadline);
  std::unique_ptr<ReplicaGroup> replicas =
      layout.replicas > 1 ? MakeMpiReplicaGroup(world.Split(ReplicaKey(layout, me)), o.deadline) : nullptr;
  if (backend == Backend::kCuda) return MakeCudaRuntime(sc, o, *control, std::move(host), std::move(replicas));
  ProcessRuntime rt;
  // Ranks that share a device share a core, as the simulator time-slices them (CoreForLocalRank).
  const int local_rank = sc.pipeline.ranks_per_device > 1 ? MpiLocalRank() : -1;  // collective: all or none
  AgreedStep(*control, o, StartupStep::kDevice, [&] {
    if (local_rank >= 0) PinToCore(CoreForLocalRank(local_rank, AllowedCores(), sc.pipeline.ranks_per_device));
    rt.device = MakeCpuDevice();
  });
  AgreedStep(*control, o, StartupStep::kTransport, [&] {
    rt.transport = std::move(host);
    rt.replicas = std::move(replicas);
  });
  return rt;
}

std::vector<std::string> StartupFailureLines(const std::vector<std::string>& errors,
                                             const std::vector<std::string>& hosts) {
  std::vector<std::string> lines;
  std::vector<bool> said(errors.size(), false);
  for (size_t r = 0; r < errors.size(); ++r) {
    if (errors[r].empty() || said[r]) continue;
    std::vector<std::string> ranks, where;
    for (size_t q = r; q < errors.size(); ++q) {
      if (errors[q] != errors[r]) continue;
      said[q] = true;
      ranks.push_back(std::to_string(q));
      const std::string host = q < hosts.size() ? hosts[q] : std::string();
      if (!host.empty() && std::find(where.begin(), where.end(), host) == where.end()) where.push_back(host);
    }
    lines.push_back(fmt::format("rank{} {}{}: {}", ranks.size() > 1 ? "s" : "", fmt::join(ranks, ", "),
                                where.empty() ? "" : fmt::format(" ({})", fmt::join(where, ", ")), errors[r]));
  }
  return lines;
}

}  // namespace stagecraft::exec
