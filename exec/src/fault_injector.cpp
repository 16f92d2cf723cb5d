// Injected faults (fault_injector.h).
#include "stagecraft/exec/fault_injector.h"

#include <chrono>
#include <cstdio>
#include <limits>
#include <stdexcept>
#include <thread>

#include <fmt/format.h>

namespace stagecraft::exec {

void FaultInjector::Inject(const schedules::Op& op, int microbatches, Device& device, float* newest_weights) {
  switch (fault_) {
    case RunHooks::Fault::kThrow:
      throw std::runtime_error(fmt::format("injected fault at step {} (--inject-fault)", op.step));
    case RunHooks::Fault::kHang:
      std::fprintf(stderr, "stagecraft: rank %d hangs at step %d (--inject-fault)\n", rank_, op.step);
      std::fflush(stderr);
      for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
    case RunHooks::Fault::kOom: {
      armed_ = false;
      // An allocation no device can satisfy, made where the op's own buffers are: the real
      // allocator fails and the failure takes the path a full device's would.
      try {
        Buffer too_big(device, int64_t{1} << 60);
      } catch (const OutOfMemory& e) {
        throw OutOfMemory(fmt::format("out of memory at {} (step {}): {} (--inject-fault)",
                                      schedules::ActionString(op, microbatches), op.step, e.what()));
      }
      return;
    }
    case RunHooks::Fault::kNan:
      device.memory().Fill(newest_weights, std::numeric_limits<float>::quiet_NaN(), 1);
      armed_ = false;  // once
      return;
  }
}

}  // namespace stagecraft::exec
