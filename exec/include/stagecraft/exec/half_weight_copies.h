// HalfWeightCopies: the cuda device's record of which fp32 weight buffers have a 16-bit copy for
// its bf16/fp16 GEMMs, and whether each copy still matches its buffer (cuda_device.h says which
// writes make, refresh, stale and drop copies). Plain bookkeeping with no CUDA in it: the device
// allocates and fills the copies; the rules are tested on the CPU.
#pragma once

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

namespace stagecraft::exec {

class HalfWeightCopies {
 public:
  struct Copy {
    const float* base = nullptr;  // the fp32 buffer [base, base + floats)
    int64_t floats = 0;
    void* halves = nullptr;  // its 16-bit copy: `floats` values, element i copying base[i]
    bool current = false;    // nothing has written into the buffer since the copy was queued
  };

  // The copy whose buffer holds all of [data, data + floats), current or not; null when none.
  // The pointer is valid until the next Add or Forget.
  Copy* Holding(const float* data, int64_t floats) {
    for (Copy& copy : copies_) {
      const uintptr_t begin = Address(copy.base), end = begin + Bytes(copy.floats);
      if (begin <= Address(data) && Address(data) + Bytes(floats) <= end) return &copy;
    }
    return nullptr;
  }
  // The copy of exactly the buffer [base, base + floats); null when none.
  Copy* Of(const float* base, int64_t floats) {
    for (Copy& copy : copies_) {
      if (copy.base == base && copy.floats == floats) return &copy;
    }
    return nullptr;
  }
  // Records `halves` as the (not yet current) copy of [base, base + floats), which no recorded
  // buffer may overlap (Forget them first).
  Copy& Add(const float* base, int64_t floats, void* halves) {
    copies_.push_back(Copy{base, floats, halves, false});
    return copies_.back();
  }
  // Something wrote into [data, data + floats): every copy of a buffer overlapping it is stale.
  void Written(const float* data, int64_t floats) {
    for (Copy& copy : copies_) {
      if (Overlaps(copy, data, floats)) copy.current = false;
    }
  }
  // [data, data + floats) is freed: the copies of buffers overlapping it are dropped from the
  // record and returned (their halves are the caller's to reuse or free).
  std::vector<Copy> Forget(const float* data, int64_t floats) {
    std::vector<Copy> dropped;
    auto kept = std::stable_partition(copies_.begin(), copies_.end(),
                                      [&](const Copy& copy) { return !Overlaps(copy, data, floats); });
    dropped.assign(kept, copies_.end());
    copies_.erase(kept, copies_.end());
    return dropped;
  }
  std::vector<Copy> ForgetAll() { return std::exchange(copies_, {}); }

  bool empty() const { return copies_.empty(); }
  size_t size() const { return copies_.size(); }

 private:
  // Addresses as integers: buffers are separate allocations, which pointers may not be ordered
  // across.
  static uintptr_t Address(const float* p) { return reinterpret_cast<uintptr_t>(p); }
  static uintptr_t Bytes(int64_t floats) { return static_cast<uintptr_t>(floats) * sizeof(float); }
  static bool Overlaps(const Copy& copy, const float* data, int64_t floats) {
    if (floats <= 0 || copy.floats <= 0) return false;
    const uintptr_t begin = Address(copy.base), end = begin + Bytes(copy.floats);
    return Address(data) < end && begin < Address(data) + Bytes(floats);
  }

  std::vector<Copy> copies_;
};

}  // namespace stagecraft::exec
