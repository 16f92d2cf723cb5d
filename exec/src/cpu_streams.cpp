// The cpu backend's streams part (cpu_parts.h): every call has run to completion when it
// returns, so every stream is idle and already ordered after every other.
#include "cpu_parts.h"

namespace stagecraft::exec {
namespace {

class CpuStreams final : public DeviceStreams {
 public:
  void Synchronize(StreamKind) override {}
  bool Idle(StreamKind) override { return true; }
  void OrderAfter(StreamKind, StreamKind) override {}
  void* Native(StreamKind) override { return nullptr; }
};

}  // namespace

std::unique_ptr<DeviceStreams> MakeCpuStreams() { return std::make_unique<CpuStreams>(); }

}  // namespace stagecraft::exec
