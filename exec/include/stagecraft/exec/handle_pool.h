// Int handles for a transport's or a collective group's pending requests (transport.h
// Transport::Request, replica_group.h ReplicaGroup::Request): each names a value of T until it
// is released, and a released handle is handed out again, so the table grows only to the most
// requests pending at once. The MPI and NCCL transports and replica groups keep theirs here.
#pragma once

#include <cstddef>
#include <utility>
#include <vector>

namespace stagecraft::exec {

template <typename T>
class HandlePool {
 public:
  // A handle for `value`: the last one released, else a new one.
  int Add(T value) {
    if (free_.empty()) {
      items_.push_back(std::move(value));
      live_.push_back(true);
      return static_cast<int>(items_.size()) - 1;
    }
    const int handle = free_.back();
    free_.pop_back();
    items_[static_cast<size_t>(handle)] = std::move(value);
    live_[static_cast<size_t>(handle)] = true;
    return handle;
  }
  // Whether `handle` names a value added and not released since.
  bool Live(int handle) const {
    return handle >= 0 && static_cast<size_t>(handle) < live_.size() && live_[static_cast<size_t>(handle)];
  }
  T& operator[](int handle) { return items_[static_cast<size_t>(handle)]; }
  const T& operator[](int handle) const { return items_[static_cast<size_t>(handle)]; }
  // The value becomes T{} and the handle may be handed out again.
  void Release(int handle) {
    items_[static_cast<size_t>(handle)] = T{};
    live_[static_cast<size_t>(handle)] = false;
    free_.push_back(handle);
  }
  // Every value, live or released (T{}), for a walk at the end.
  std::vector<T>& items() { return items_; }

 private:
  std::vector<T> items_;  // by handle
  std::vector<bool> live_;
  std::vector<int> free_;
};

}  // namespace stagecraft::exec
