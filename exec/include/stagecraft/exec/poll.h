// Waiting on work that completes on its own (an MPI request, a CUDA event) under a deadline,
// without starving a rank that shares the core: poll, spin a while, then sleep between polls
// with a backoff. One loop for every transport and collective, tested on its own. Header-only:
// the cuda backend's library (exec_cuda) uses it and must not link back into exec.
#pragma once

#include <time.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>

namespace stagecraft::exec {

struct PollPolicy {
  int64_t deadline_ns = 0;   // give up once this much has passed since the first poll
  int64_t spin_ns = 0;       // poll back to back this long (INT64_MAX: never sleep)
  int64_t min_sleep_ns = 0;  // then sleep between polls, doubling from this ...
  int64_t max_sleep_ns = 0;  // ... up to this
};

inline int64_t MonotonicNowNs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1'000'000'000LL + ts.tv_nsec;
}

inline void SleepNs(int64_t ns) {
  const timespec ts{static_cast<time_t>(ns / 1'000'000'000), static_cast<long>(ns % 1'000'000'000)};
  nanosleep(&ts, nullptr);
}

// "3 s", "0.25 s": a deadline in a message.
inline std::string SecondsText(int64_t ns) {
  char text[32];
  std::snprintf(text, sizeof(text), "%g s", static_cast<double>(ns) * 1e-9);
  return text;
}

// Polls `done` until it returns true (then true) or the deadline passes first (then false).
// `now_ns` (a monotonic clock) and `sleep_ns` are the system's unless a test passes its own.
inline bool PollUntil(const std::function<bool()>& done, const PollPolicy& policy,
                      const std::function<int64_t()>& now_ns = MonotonicNowNs,
                      const std::function<void(int64_t)>& sleep_ns = SleepNs) {
  const int64_t start = now_ns();
  int64_t sleep = std::max<int64_t>(policy.min_sleep_ns, 1);
  while (!done()) {
    const int64_t waited = now_ns() - start;
    if (waited > policy.deadline_ns) return false;
    if (waited < policy.spin_ns) continue;
    sleep_ns(sleep);
    sleep = std::min(2 * sleep, std::max(policy.max_sleep_ns, sleep));
  }
  return true;
}

}  // namespace stagecraft::exec
