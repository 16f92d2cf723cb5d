// StagedTransport (staged_transport.h).
#include "stagecraft/exec/staged_transport.h"

#include <cstdlib>
#include <stdexcept>
#include <utility>
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
    try {  // the copies still queued read or write the host blocks freed below
      device_.streams().Synchronize(StreamKind::kToHost);
      device_.streams().Synchronize(StreamKind::kToDevice);
    } catch (...) {  // a failed device: its memory goes with the process
    }
    for (const auto& [block, words] : uploading_) free_host_.Keep(block, words);
    free_host_.Drain([this](float* block, int64_t floats) { device_.memory().Free(block, floats, MemoryTier::kHost); });
    for (Staged& s : staged_) {
      if (s.host != nullptr) device_.memory().Free(s.host, s.words, MemoryTier::kHost);
    }
  }

  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  std::string Name() const override { return inner_->Name() + " (host-staged)"; }

  using Transport::Irecv;
  using Transport::Isend;
  // The copy to the host is queued on the to-host stream after the work that makes `data`; the
  // inner send is posted once the copies queued there have run (PostCopied), seen by a later
  // call of the transport. `data` is read until the send completes.
  Request Isend(const void* data, int64_t count, ElementType type, int peer, int64_t tag) override {
    const int64_t words = Words(count, type);
    float* host = TakeHost(words);
    device_.streams().OrderAfter(StreamKind::kToHost, StreamKind::kCompute);
    device_.memory().CopyAsync(host, MemoryTier::kHost, static_cast<const float*>(data), MemoryTier::kDevice, words,
                               StreamKind::kToHost);
    const Request request = Track({.host = host, .words = words, .count = count, .type = type, .peer = peer, .tag = tag});
    unposted_.push_back(request);
    PostCopied(false);
    return request;
  }
  Request Irecv(void* data, int64_t count, ElementType type, int peer, int64_t tag) override {
    PostCopied(false);
    const int64_t words = Words(count, type);
    float* host = TakeHost(words);
    return Track({.inner = inner_->Irecv(host, count, type, peer, tag),
                  .device_dst = static_cast<float*>(data),
                  .host = host,
                  .words = words});
  }
  bool Test(Request request) override {
    PostCopied(false);
    Staged& s = At(request);
    if (s.inner < 0 || !inner_->Test(s.inner)) return false;
    Complete(request);
    return true;
  }
  // The sends still waiting for their copies are posted first (waiting for the copies): a peer
  // may wait for one of them before it sends what this waits for.
  void Wait(Request request) override {
    PostCopied(true);
    inner_->Wait(At(request).inner);
    Complete(request);
  }

  void Flush() override { PostCopied(true); }
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
    Request inner = -1;           // -1: a send not posted yet (its copy to the host queued)
    float* device_dst = nullptr;  // a receive's destination; null for a send
    float* host = nullptr;        // null once complete
    int64_t words = 0;            // 4-byte words staged
    // A send's, for its post.
    int64_t count = 0;
    ElementType type = ElementType::kF32;
    int peer = 0;
    int64_t tag = 0;
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
  // Posts the sends whose copies to the host have run: all of them once the to-host stream is
  // idle (`wait`: after waiting for it), none before (its copies run in order, and the stream
  // tells only whether all have).
  void PostCopied(bool wait) {
    if (unposted_.empty()) return;
    if (wait) {
      device_.streams().Synchronize(StreamKind::kToHost);
    } else if (!device_.streams().Idle(StreamKind::kToHost)) {
      return;
    }
    for (const Request r : unposted_) {
      Staged& s = staged_[r];
      s.inner = inner_->Isend(s.host, s.count, s.type, s.peer, s.tag);
    }
    unposted_.clear();
  }
  // A received message goes to the device on the to-device stream, after the work queued so far
  // (its buffer may have been freed by work still queued) and before the work queued from now
  // on (its consumer): the host does not wait for the device. Its host buffer is reused once
  // the to-device stream has run it; a send's at once (its copy ran before it was posted).
  void Complete(Request request) {
    Staged& s = staged_[request];
    if (s.device_dst != nullptr) {
      DeviceStreams& streams = device_.streams();
      streams.OrderAfter(StreamKind::kToDevice, StreamKind::kCompute);
      device_.memory().CopyAsync(s.device_dst, MemoryTier::kDevice, s.host, MemoryTier::kHost, s.words,
                                 StreamKind::kToDevice);
      streams.OrderAfter(StreamKind::kCompute, StreamKind::kToDevice);
      uploading_.emplace_back(s.host, s.words);
    } else {
      free_host_.Keep(s.host, s.words);
    }
    s = Staged{};
    free_handles_.push_back(request);
  }
  float* TakeHost(int64_t count) {
    if (!uploading_.empty() && device_.streams().Idle(StreamKind::kToDevice)) {
      for (const auto& [block, words] : uploading_) free_host_.Keep(block, words);
      uploading_.clear();
    }
    float* kept = free_host_.Take(count);
    return kept != nullptr ? kept : device_.memory().Allocate(count, MemoryTier::kHost);
  }

  std::unique_ptr<Transport> inner_;
  Device& device_;
  std::vector<Staged> staged_;
  std::vector<Request> free_handles_;
  std::vector<Request> unposted_;                      // sends whose copies were queued, in order
  std::vector<std::pair<float*, int64_t>> uploading_;  // host blocks queued uploads read, and words
  BlockPool free_host_;                                // host buffers for reuse
};

}  // namespace

std::unique_ptr<Transport> MakeStagedTransport(std::unique_ptr<Transport> inner, Device& device) {
  return std::make_unique<StagedTransport>(std::move(inner), device);
}

}  // namespace stagecraft::exec
