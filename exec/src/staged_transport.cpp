// StagedTransport (staged_transport.h).
#include "stagecraft/exec/staged_transport.h"

#include <cstdlib>
#include <stdexcept>
#include <vector>

#include <fmt/format.h>

#include "stagecraft/base/check.h"
#include "stagecraft/exec/block_pool.h"

namespace stagecraft::exec {
namespace {

class StagedTransport final : public Transport {
 public:
  StagedTransport(std::unique_ptr<Transport> inner, Device& device) : inner_(std::move(inner)), device_(device) {}
  ~StagedTransport() override {
    free_host_.Drain([this](float* block, int64_t floats) { device_.memory().Free(block, floats, MemoryTier::kHost); });
    for (Staged& s : staged_) {
      if (s.host != nullptr) device_.memory().Free(s.host, s.count, MemoryTier::kHost);
    }
  }

  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  std::string Name() const override { return inner_->Name() + " (host-staged)"; }

  using Transport::Irecv;
  using Transport::Isend;
  Request Isend(const void* data, int64_t count, ElementType type, int peer, int64_t tag) override {
    const int64_t words = Words(count, type);
    float* host = TakeHost(words);
    device_.memory().Download(host, static_cast<const float*>(data), words);  // waits for the work that produced `data`
    return Track({inner_->Isend(host, count, type, peer, tag), nullptr, host, words});
  }
  Request Irecv(void* data, int64_t count, ElementType type, int peer, int64_t tag) override {
    const int64_t words = Words(count, type);
    float* host = TakeHost(words);
    return Track({inner_->Irecv(host, count, type, peer, tag), static_cast<float*>(data), host, words});
  }
  bool Test(Request request) override {
    Staged& s = At(request);
    if (!inner_->Test(s.inner)) return false;
    Complete(request);
    return true;
  }
  void Wait(Request request) override {
    inner_->Wait(At(request).inner);
    Complete(request);
  }

  void Barrier() override { inner_->Barrier(); }
  bool EveryRank(bool mine) override { return inner_->EveryRank(mine); }
  std::vector<std::string> Gather(const std::string& mine, int root) override { return inner_->Gather(mine, root); }
  void Broadcast(std::string* text, int root) override { inner_->Broadcast(text, root); }
  std::chrono::nanoseconds deadline() const override { return inner_->deadline(); }
  [[noreturn]] void Abort(int exit_code) override {
    inner_->Abort(exit_code);
    std::_Exit(exit_code);  // the inner Abort does not return; this only satisfies [[noreturn]]
  }

 private:
  struct Staged {
    Request inner = 0;
    float* device_dst = nullptr;  // a receive's destination; null for a send
    float* host = nullptr;        // null once complete
    int64_t count = 0;            // 4-byte words staged
  };

  // The device's copies move 4-byte words (device_memory.h): a tensor of another type is staged
  // as the words that hold its bytes, which must fill them (an odd count of bf16 does not).
  static int64_t Words(int64_t count, ElementType type) {
    const int64_t bytes = count * ElementBytes(type);
    if (count < 0 || bytes % 4 != 0) {
      throw std::invalid_argument(fmt::format(
          "a host-staged transfer of {} {} elements: the staged bytes ({}) must be whole 4-byte words", count,
          ElementTypeName(type), bytes));
    }
    return bytes / 4;
  }

  Staged& At(Request request) {
    SC_CHECK(request >= 0 && static_cast<size_t>(request) < staged_.size() && staged_[request].host != nullptr,
             fmt::format("staged transport: no pending request {}", request));
    return staged_[request];
  }
  Request Track(const Staged& s) {
    Request handle;
    if (!free_handles_.empty()) {
      handle = free_handles_.back();
      free_handles_.pop_back();
      staged_[handle] = s;
    } else {
      handle = static_cast<Request>(staged_.size());
      staged_.push_back(s);
    }
    return handle;
  }
  // A received message goes to the device; the host buffer and the handle are reused.
  void Complete(Request request) {
    Staged& s = staged_[request];
    if (s.device_dst != nullptr) device_.memory().Upload(s.device_dst, s.host, s.count);
    free_host_.Keep(s.host, s.count);
    s = Staged{};
    free_handles_.push_back(request);
  }
  float* TakeHost(int64_t count) {
    float* kept = free_host_.Take(count);
    return kept != nullptr ? kept : device_.memory().Allocate(count, MemoryTier::kHost);
  }

  std::unique_ptr<Transport> inner_;
  Device& device_;
  std::vector<Staged> staged_;
  std::vector<Request> free_handles_;
  BlockPool free_host_;  // host buffers for reuse
};

}  // namespace

std::unique_ptr<Transport> MakeStagedTransport(std::unique_ptr<Transport> inner, Device& device) {
  return std::make_unique<StagedTransport>(std::move(inner), device);
}

}  // namespace stagecraft::exec
