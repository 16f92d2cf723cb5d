// Sharded-LRTF and the sequential baseline over a workload's units (workload.h).
#include "stagecraft/sim/workload.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <stdexcept>

namespace stagecraft::sim {
namespace {

constexpr int64_t kNever = std::numeric_limits<int64_t>::max();

void CheckTasks(const std::vector<WorkloadTask>& tasks, int devices) {
  if (devices < 1) throw std::invalid_argument("a workload needs at least one device");
  for (const WorkloadTask& t : tasks) {
    if (t.units.empty()) throw std::invalid_argument(fmt::format("task '{}' has no units", t.name));
    if (t.devices < 1 || t.devices > devices) {
      throw std::invalid_argument(fmt::format("task '{}' needs {} devices of {}", t.name, t.devices, devices));
    }
    if (!t.moves && t.units.size() != 1) {
      throw std::invalid_argument(fmt::format("task '{}' holds its devices but has {} units", t.name, t.units.size()));
    }
    if (t.moves && t.devices != 1) {
      throw std::invalid_argument(fmt::format("task '{}' moves but needs {} devices", t.name, t.devices));
    }
    for (const WorkUnit& u : t.units) {
      if (u.warm_ns < 0 || u.cold_ns < u.warm_ns || u.busy_ns < 0 || u.busy_ns > u.warm_ns) {
        throw std::invalid_argument(fmt::format("task '{}' has a unit with warm {} ns, cold {} ns, busy {} ns", t.name,
                                                u.warm_ns, u.cold_ns, u.busy_ns));
      }
    }
  }
}

// What is left of every task, and where each device and task stands, while the units are placed.
class Placement {
 public:
  Placement(const std::vector<WorkloadTask>& tasks, int devices, TaskScheduler scheduler)
      : tasks_(tasks), free_at_(static_cast<size_t>(devices), 0), last_task_(static_cast<size_t>(devices), -1),
        busy_(static_cast<size_t>(devices), 0) {
    result_.scheduler = scheduler;
    result_.task_start_ns.assign(tasks.size(), -1);
    result_.task_end_ns.assign(tasks.size(), 0);
    next_.assign(tasks.size(), 0);
    ready_at_.assign(tasks.size(), 0);
    last_device_.assign(tasks.size(), -1);
    for (const WorkloadTask& t : tasks) remaining_.push_back(t.AloneNs());
  }

  bool Done(size_t t) const { return next_[t] == tasks_[t].units.size(); }
  bool AllDone() const {
    for (size_t t = 0; t < tasks_.size(); ++t) {
      if (!Done(t)) return false;
    }
    return true;
  }
  int64_t Remaining(size_t t) const { return remaining_[t]; }
  int64_t ReadyAt(size_t t) const { return ready_at_[t]; }
  int LastDevice(size_t t) const { return last_device_[t]; }
  bool Free(int device, int64_t now) const { return free_at_[static_cast<size_t>(device)] <= now; }
  int devices() const { return static_cast<int>(free_at_.size()); }
  // A unit runs as in its task's own run (warm) when it is the task's first, or follows the
  // task's previous unit on this device with nothing else run there in between.
  bool Warm(size_t t, int device) const {
    return next_[t] == 0 || (last_device_[t] == device && last_task_[static_cast<size_t>(device)] == static_cast<int>(t));
  }
  // The first device of a free aligned block of `size` devices, or -1.
  int FreeBlock(int size, int64_t now) const {
    for (int first = 0; first + size <= devices(); first += size) {
      bool free = true;
      for (int d = first; d < first + size && free; ++d) free = Free(d, now);
      if (free) return first;
    }
    return -1;
  }
  // The earliest time after `now` at which a device frees or a task becomes ready.
  int64_t NextEvent(int64_t now) const {
    int64_t next = kNever;
    for (int64_t at : free_at_) {
      if (at > now) next = std::min(next, at);
    }
    for (size_t t = 0; t < tasks_.size(); ++t) {
      if (!Done(t) && ready_at_[t] > now) next = std::min(next, ready_at_[t]);
    }
    return next;
  }

  // Runs task t's next unit on devices [device, device + its gang) from `now`.
  void Run(size_t t, int device, int64_t now) {
    const WorkloadTask& task = tasks_[t];
    const WorkUnit& unit = task.units[next_[t]];
    const bool warm = Warm(t, device);
    const int64_t end = now + (warm ? unit.warm_ns : unit.cold_ns);
    result_.runs.push_back(UnitRun{static_cast<int>(t), static_cast<int>(next_[t]), device, task.devices, now, end, !warm});
    for (int d = device; d < device + task.devices; ++d) {
      free_at_[static_cast<size_t>(d)] = end;
      last_task_[static_cast<size_t>(d)] = static_cast<int>(t);
      busy_[static_cast<size_t>(d)] += unit.busy_ns;
    }
    if (result_.task_start_ns[t] < 0) result_.task_start_ns[t] = now;
    result_.task_end_ns[t] = end;
    remaining_[t] -= unit.warm_ns;
    ready_at_[t] = end;
    last_device_[t] = device;
    ++next_[t];
  }

  WorkloadSchedule Finish() && {
    for (int64_t end : result_.task_end_ns) result_.makespan_ns = std::max(result_.makespan_ns, end);
    for (int64_t b : busy_) {
      result_.device_busy_fraction.push_back(
          result_.makespan_ns > 0 ? std::min(1.0, static_cast<double>(b) / static_cast<double>(result_.makespan_ns)) : 0.0);
    }
    return std::move(result_);
  }

 private:
  const std::vector<WorkloadTask>& tasks_;
  std::vector<int64_t> free_at_;
  std::vector<int> last_task_;
  std::vector<int64_t> busy_;
  std::vector<size_t> next_;
  std::vector<int64_t> ready_at_;
  std::vector<int> last_device_;
  std::vector<int64_t> remaining_;
  WorkloadSchedule result_;
};

WorkloadSchedule Sequential(const std::vector<WorkloadTask>& tasks, int devices) {
  Placement p(tasks, devices, TaskScheduler::kSequential);
  int64_t now = 0;
  for (size_t t = 0; t < tasks.size(); ++t) {
    while (!p.Done(t)) {
      p.Run(t, 0, now);
      now = p.ReadyAt(t);
    }
  }
  return std::move(p).Finish();
}

// Whenever devices are free, the waiting tasks in order of their remaining time, longest first,
// each on its own last device when that is free (its shard stays resident), else on a free device
// that no other waiting task left its shard on, else on any free device, the highest numbered
// first; a gang on the first free aligned block from the lowest (so that moving tasks leave the
// blocks gangs need). A task that finds no place waits for the next event; a shorter one may go first.
WorkloadSchedule Lrtf(const std::vector<WorkloadTask>& tasks, int devices) {
  Placement p(tasks, devices, TaskScheduler::kLrtf);
  int64_t now = 0;
  std::vector<size_t> waiting;
  while (!p.AllDone()) {
    waiting.clear();
    for (size_t t = 0; t < tasks.size(); ++t) {
      if (!p.Done(t) && p.ReadyAt(t) <= now) waiting.push_back(t);
    }
    std::stable_sort(waiting.begin(), waiting.end(),
                     [&](size_t a, size_t b) { return p.Remaining(a) > p.Remaining(b); });
    bool placed = false;
    for (size_t i = 0; i < waiting.size(); ++i) {
      const size_t t = waiting[i];
      int device = -1;
      if (!tasks[t].moves) {
        device = p.FreeBlock(tasks[t].devices, now);
      } else if (const int last = p.LastDevice(t); last >= 0 && p.Free(last, now) && p.Warm(t, last)) {
        device = last;
      } else {
        for (int d = p.devices() - 1; d >= 0 && device < 0; --d) {
          if (!p.Free(d, now)) continue;
          bool kept_for_other = false;
          for (size_t j = i + 1; j < waiting.size() && !kept_for_other; ++j) {
            kept_for_other = tasks[waiting[j]].moves && p.LastDevice(waiting[j]) == d && p.Warm(waiting[j], d);
          }
          if (!kept_for_other) device = d;
        }
        for (int d = p.devices() - 1; d >= 0 && device < 0; --d) {
          if (p.Free(d, now)) device = d;
        }
      }
      if (device >= 0) {
        p.Run(t, device, now);
        placed = true;
      }
    }
    if (placed) continue;  // a unit of no time frees its task and device at once
    const int64_t next = p.NextEvent(now);
    if (next == kNever) throw std::logic_error("Sharded-LRTF: tasks wait but no device will free");
    now = next;
  }
  return std::move(p).Finish();
}

}  // namespace

WorkloadSchedule ScheduleWorkload(const std::vector<WorkloadTask>& tasks, int devices, TaskScheduler scheduler) {
  CheckTasks(tasks, devices);
  return scheduler == TaskScheduler::kSequential ? Sequential(tasks, devices) : Lrtf(tasks, devices);
}

}  // namespace stagecraft::sim
