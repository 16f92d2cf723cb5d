// CpuDevice: the cpu backend's parts put together (see cpu_device.h, cpu_parts.h), and where
// a rank runs (its core).
#include "stagecraft/exec/cpu_device.h"

#include <cblas.h>
#include <sched.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <vector>

#include <fmt/format.h>

#include "cpu_parts.h"

namespace stagecraft::exec {
namespace {

class CpuOpContext final : public OpContext {};

class CpuDevice final : public Device {
 public:
  CpuDevice() : memory_(MakeCpuMemory()), streams_(MakeCpuStreams()), clock_(MakeCpuClock()) {
    openblas_set_num_threads(1);
  }

  std::string Name() const override { return "cpu"; }
  DeviceMemory& memory() override { return *memory_; }
  DeviceStreams& streams() override { return *streams_; }
  DeviceClock& clock() override { return *clock_; }
  const LayerOps& ops() const override { return LayerOpsFor(OpBackend::kCpu); }
  OpContext& op_context() override { return context_; }

 private:
  std::unique_ptr<DeviceMemory> memory_;
  std::unique_ptr<DeviceStreams> streams_;
  std::unique_ptr<DeviceClock> clock_;
  CpuOpContext context_;
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
