// The plan's search state shared by its threads (plan.cpp): a pool of threads over the
// candidates, and the board of counts, simulated entries and the K best times.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <exception>
#include <iterator>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "stagecraft/base/error.h"
#include "stagecraft/harness/plan.h"

namespace stagecraft::harness::detail {

// Calls fn(i) for i in [0, n) on `threads` threads.
// The first exception any call throws is rethrown here, after every thread has stopped. A thread
// the system cannot start (std::system_error: no memory for its stack, a process limit) stops
// the others and is an InputError naming --threads, never std::terminate.
template <class Fn>
void ParallelFor(size_t n, int threads, Fn fn) {
  std::atomic<size_t> next{0};
  std::mutex mutex;
  std::exception_ptr failure;
  const auto work = [&] {
    for (size_t i = next++; i < n; i = next++) {
      try {
        fn(i);
      } catch (...) {
        const std::lock_guard<std::mutex> lock(mutex);
        if (!failure) failure = std::current_exception();
        next = n;
      }
    }
  };
  std::vector<std::thread> pool;
  const size_t wanted = std::min(static_cast<size_t>(std::max(threads, 1)), n);
  if (wanted > 1) pool.reserve(wanted - 1);
  std::string not_started;
  for (size_t t = 1; t < wanted; ++t) {
    try {
      pool.emplace_back(work);
    } catch (const std::system_error& e) {
      not_started = fmt::format("--threads: could not start thread {} of {} ({}); ask for fewer", t + 1, wanted, e.what());
      next = n;  // the threads started take no more work
      break;
    }
  }
  if (not_started.empty()) work();
  for (std::thread& t : pool) t.join();
  if (!not_started.empty()) throw InputError(not_started);
  if (failure) std::rethrow_exception(failure);
}

// The search's shared state: the counts, the simulated entries, the K best times.
class Board {
 public:
  using Clock = std::chrono::steady_clock;
  Board(int top, const PlanOptions& options) : top_(top), options_(options), start_(Clock::now()) {}

  // Whether a configuration whose run takes at least `floor_ns` and holds at least
  // `memory_floor` bytes can still matter: place among the K fastest, or on the Pareto front of
  // time against memory (no fitting run so far is as fast with as little memory).
  bool CouldMatter(int64_t floor_ns, int64_t memory_floor) {
    const std::lock_guard<std::mutex> lock(mutex_);
    if (best_.size() < static_cast<size_t>(top_) || floor_ns <= *std::prev(best_.end())) return true;
    // front_: fitting runs by peak ascending, each faster than all before it.
    const auto it = front_.upper_bound(memory_floor);  // the first that holds more
    return it == front_.begin() || std::prev(it)->second > floor_ns;
  }
  void Reject(PlanReject why, bool simulated = false) {
    const std::lock_guard<std::mutex> lock(mutex_);
    ++rejected_[static_cast<int>(why)];
    if (simulated) ++memory_simulated_;
    Tick();
  }
  void Add(PlanEntry entry) {
    const std::lock_guard<std::mutex> lock(mutex_);
    ++simulated_;
    if (entry.fits) {
      best_.insert(entry.metrics.makespan_ns);
      if (best_.size() > static_cast<size_t>(top_)) best_.erase(std::prev(best_.end()));
      AddToFront(entry.peak_bytes, entry.metrics.makespan_ns);
    } else {
      ++rejected_[static_cast<int>(PlanReject::kMemory)];
      ++memory_simulated_;
    }
    entries_.push_back(std::move(entry));
    Tick();
  }
  void SetCandidates(int64_t n) { progress_.candidates = n; }
  void Finish(PlanResult* r) {
    for (int k = 0; k < kPlanRejectKinds; ++k) r->rejected[k] += rejected_[k];
    r->memory_rejected_simulated += memory_simulated_;
    r->simulated += simulated_;
    for (PlanEntry& e : entries_) r->entries.push_back(std::move(e));
    entries_.clear();
  }

 private:
  void Tick() {
    ++progress_.done;
    progress_.simulated = simulated_;
    const double now = std::chrono::duration<double>(Clock::now() - start_).count();
    if (options_.progress && (now - last_report_ >= 0.25 || progress_.done == progress_.candidates)) {
      progress_.seconds = now;
      last_report_ = now;
      options_.progress(progress_);
    }
  }

  void AddToFront(int64_t peak, int64_t makespan) {
    auto it = front_.upper_bound(peak);
    if (it != front_.begin() && std::prev(it)->second <= makespan) return;  // dominated
    it = front_.insert_or_assign(peak, makespan).first;
    for (auto next = std::next(it); next != front_.end() && next->second >= makespan;) next = front_.erase(next);
  }

  std::mutex mutex_;
  std::map<int64_t, int64_t> front_;  // peak bytes -> makespan of the front so far
  int top_;
  const PlanOptions& options_;
  Clock::time_point start_;
  double last_report_ = -1;
  PlanProgress progress_;
  std::multiset<int64_t> best_;
  int64_t rejected_[kPlanRejectKinds] = {};
  int64_t memory_simulated_ = 0, simulated_ = 0;
  std::vector<PlanEntry> entries_;
};

}  // namespace stagecraft::harness::detail
