// StagedTransport (staged_transport.h).
#include "stagecraft/exec/staged_transport.h"

#include <cstddef>
#include <cstdlib>
#include <stdexcept>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "stagecraft/base/check.h"
#include "stagecraft/exec/block_pool.h"
#include "stagecraft/exec/poll.h"

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
    for (const Request r : unposted_) device_.streams().DropFence(staged_[r].fence);
    for (const Upload& u : uploading_) {
      device_.streams().DropFence(u.fence);
      free_host_.Keep(u.host, u.words);
    }
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
  // inner send is posted once that copy has run (its fence: PostCopied), seen by a later call of
  // the transport. `data` is read until the send completes.
  Request Isend(const void* data, int64_t count, ElementType type, int peer, int64_t tag) override {
    const int64_t words = Words(count, type);
    float* host = TakeHost(words);
    device_.streams().OrderAfter(StreamKind::kToHost, StreamKind::kCompute);
    PostCopied(false);  // before this copy: the sends whose copies have run go first
    device_.memory().CopyAsync(host, MemoryTier::kHost, static_cast<const float*>(data), MemoryTier::kDevice, words,
                               StreamKind::kToHost);
    const Request request = Track({.host = host,
                                   .words = words,
                                   .count = count,
                                   .type = type,
                                   .peer = peer,
                                   .tag = tag,
                                   .fence = device_.streams().MakeFence(StreamKind::kToHost)});
    unposted_.push_back(request);
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
    DeviceStreams::Fence fence = nullptr;  // after its copy to the host, until posted
  };
  struct Upload {
    float* host = nullptr;  // read by the queued copy to the device
    int64_t words = 0;
    DeviceStreams::Fence fence = nullptr;  // after that copy
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
  // Posts, in order, the sends whose copies to the host have run (their fences reached); with
  // `wait`, all of them, polling each fence under the deadline. A send posted leaves the list at
  // once, so a post that throws is not made twice.
  void PostCopied(bool wait) {
    DeviceStreams& streams = device_.streams();
    while (!unposted_.empty()) {
      Staged& s = staged_[unposted_.front()];
      if (!streams.FenceReached(s.fence)) {
        if (!wait) return;
        const PollPolicy policy{.deadline_ns = inner_->deadline().count(), .spin_ns = 20'000,
                                .min_sleep_ns = 10'000, .max_sleep_ns = 200'000};
        if (!PollUntil([&] { return streams.FenceReached(s.fence); }, policy)) {
          throw TimeoutError(fmt::format("a host-staged send to rank {} (tag {}): the device did not copy it to the "
                                         "host within the deadline",
                                         s.peer, s.tag));
        }
      }
      streams.DropFence(s.fence);
      s.fence = nullptr;
      unposted_.erase(unposted_.begin());
      s.inner = inner_->Isend(s.host, s.count, s.type, s.peer, s.tag);
    }
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
      uploading_.push_back({s.host, s.words, streams.MakeFence(StreamKind::kToDevice)});
      streams.OrderAfter(StreamKind::kCompute, StreamKind::kToDevice);
    } else {
      free_host_.Keep(s.host, s.words);
    }
    s = Staged{};
    free_handles_.push_back(request);
  }
  float* TakeHost(int64_t count) {
    // Uploads run in order on their stream: the reached ones are a prefix.
    size_t done = 0;
    for (; done < uploading_.size() && device_.streams().FenceReached(uploading_[done].fence); ++done) {
      device_.streams().DropFence(uploading_[done].fence);
      free_host_.Keep(uploading_[done].host, uploading_[done].words);
    }
    uploading_.erase(uploading_.begin(), uploading_.begin() + static_cast<std::ptrdiff_t>(done));
    float* kept = free_host_.Take(count);
    return kept != nullptr ? kept : device_.memory().Allocate(count, MemoryTier::kHost);
  }

  std::unique_ptr<Transport> inner_;
  Device& device_;
  std::vector<Staged> staged_;
  std::vector<Request> free_handles_;
  std::vector<Request> unposted_;                      // sends whose copies were queued, in order
  std::vector<Upload> uploading_;                      // in the order queued
  BlockPool free_host_;                                // host buffers for reuse
};

}  // namespace

std::unique_ptr<Transport> MakeStagedTransport(std::unique_ptr<Transport> inner, Device& device) {
  return std::make_unique<StagedTransport>(std::move(inner), device);
}

}  // namespace stagecraft::exec
