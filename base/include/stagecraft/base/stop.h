// Ending a long computation early on another thread's request (Ctrl-C in the Python module):
// the caller owns a std::atomic<bool>, passes a pointer to it down (null: never stopped), and
// each phase looks at it between pieces of work small enough that the whole call answers well
// within a second. A stopped phase throws StopRequested; what it was making is dropped.
#pragma once

#include <atomic>
#include <cstdint>
#include <exception>

namespace stagecraft {

// What a stopped computation throws: the work is abandoned, not an error of its input.
struct StopRequested : std::exception {
  const char* what() const noexcept override { return "stopped on request"; }
};

// Throws StopRequested when `stop` is set.
inline void ThrowIfStopped(const std::atomic<bool>* stop) {
  if (stop != nullptr && stop->load(std::memory_order_relaxed)) throw StopRequested{};
}

// For a loop of millions of small iterations: one atomic load per kEvery calls, and nothing at
// all without a flag.
class StopCheck {
 public:
  static constexpr uint32_t kEvery = 4096;
  explicit StopCheck(const std::atomic<bool>* stop) : stop_(stop) {}
  void operator()() {
    if (stop_ != nullptr && ++calls_ % kEvery == 0) ThrowIfStopped(stop_);
  }
  // A look now, whatever the count: between the phases of a loop's owner.
  void Now() const { ThrowIfStopped(stop_); }
  // The flag itself, for a callee that keeps its own count.
  const std::atomic<bool>* flag() const { return stop_; }

 private:
  const std::atomic<bool>* stop_;
  uint32_t calls_ = 0;
};

}  // namespace stagecraft
