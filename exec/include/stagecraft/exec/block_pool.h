// Freed blocks kept for reuse by their size in floats, so that a run whose buffers repeat every
// microbatch takes nothing new from the system once warm. The devices' memory (cpu, cuda) and
// the staged transport's host buffers each keep one.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

namespace stagecraft::exec {

class BlockPool {
 public:
  // A kept block of exactly `floats` floats, or null when there is none.
  float* Take(int64_t floats) {
    auto it = blocks_.find(floats);
    if (it == blocks_.end() || it->second.empty()) return nullptr;
    float* block = it->second.back();
    it->second.pop_back();
    return block;
  }
  void Keep(float* block, int64_t floats) { blocks_[floats].push_back(block); }
  // Hands every kept block to release(block, floats) and forgets them.
  template <typename Release>
  void Drain(Release release) {
    for (auto& [floats, blocks] : blocks_) {
      for (float* block : blocks) release(block, floats);
    }
    blocks_.clear();
  }

 private:
  std::unordered_map<int64_t, std::vector<float*>> blocks_;
};

}  // namespace stagecraft::exec
