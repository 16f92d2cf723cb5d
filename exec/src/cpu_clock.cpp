// The cpu backend's clock part (cpu_parts.h): every call has run to completion when it
// returns, so a stamp is the steady clock read at Stamp(), and every stamp is reached.
#include <chrono>
#include <vector>

#include "cpu_parts.h"

namespace stagecraft::exec {
namespace {

class CpuClock final : public DeviceClock {
 public:
  int64_t NowNs() override {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
  int Stamp() override {
    stamps_.push_back(NowNs());
    return static_cast<int>(stamps_.size()) - 1;
  }
  int64_t StampNs(int id) override { return stamps_.at(static_cast<size_t>(id)); }
  bool Reached(int) override { return true; }
  void ClearStamps() override { stamps_.clear(); }

 private:
  std::vector<int64_t> stamps_;
};

}  // namespace

std::unique_ptr<DeviceClock> MakeCpuClock() { return std::make_unique<CpuClock>(); }

}  // namespace stagecraft::exec
