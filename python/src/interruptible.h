// A long call (plan, search, simulate) that Ctrl-C stops: the work runs on a thread of its own
// with the GIL released while the caller's thread, which receives the signal, waits in short
// slices and between them lets Python run its signal handlers. On KeyboardInterrupt it sets the
// work's cancel flag, waits for the work to stop, and raises the interrupt.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <optional>
#include <system_error>
#include <thread>
#include <utility>

#include <pybind11/pybind11.h>

namespace stagecraft::python {

// How often the waiting thread looks for a signal: well under the second the interrupt is
// promised within, and rare enough to cost nothing.
inline constexpr std::chrono::milliseconds kSignalPollInterval{50};

// Runs `work(const std::atomic<bool>* cancel)`, which must not touch Python objects, and
// returns its result; call with the GIL held. `work` stops soon after *cancel turns true, and
// what it returns or throws then is dropped for the KeyboardInterrupt (or whatever the signal
// handler raised). Where no thread can be started, it runs on this one, not interruptible.
template <class Work>
auto RunInterruptibly(Work work) -> decltype(work(nullptr)) {
  namespace py = pybind11;
  using Result = decltype(work(nullptr));
  std::atomic<bool> cancel{false};
  std::optional<Result> result;
  std::exception_ptr failure;
  std::mutex mutex;
  std::condition_variable finished;
  bool done = false;
  std::thread worker;
  try {
    worker = std::thread([&] {
      try {
        result.emplace(work(&cancel));
      } catch (...) {
        failure = std::current_exception();
      }
      const std::lock_guard<std::mutex> lock(mutex);
      done = true;
      finished.notify_one();
    });
  } catch (const std::system_error&) {
    py::gil_scoped_release release;
    return work(&cancel);
  }
  for (;;) {
    {
      py::gil_scoped_release release;
      std::unique_lock<std::mutex> lock(mutex);
      if (finished.wait_for(lock, kSignalPollInterval, [&] { return done; })) break;
    }
    if (PyErr_CheckSignals() != 0) {
      cancel = true;
      {
        py::gil_scoped_release release;
        worker.join();
      }
      throw py::error_already_set();
    }
  }
  {
    py::gil_scoped_release release;
    worker.join();
  }
  if (failure) std::rethrow_exception(failure);
  return std::move(*result);
}

}  // namespace stagecraft::python
