// A Transport for the step graphs' tests of pipelines on the CPU (step_graphs_mpi.cpp): it moves
// tensors over a real transport (MPI) and, while its CapturingCpuDevice captures a step, records
// each transfer into the capture as the nccl transport's are recorded into a CUDA capture
// (Transport::CapturesTransfers): the post is a call run at each launch, a receive's consumer
// waits for it inside the launch (OrderAfter records the wait where the device would wait), and
// the capture's end records the wait of every transfer no consumer waited for (EndCapture), all
// by the books the nccl transport keeps too (exec/capture_book.h). The
// host then never posts a transfer of a replayed step: it counts the posts it makes itself. A
// recorded transfer's end stamp is taken as its post runs (the double does not time transfers).
#pragma once

#include <cstdlib>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "capturing_device.h"
#include "stagecraft/exec/capture_book.h"
#include "stagecraft/exec/handle_pool.h"
#include "stagecraft/exec/transport.h"

namespace stagecraft::testing {

class CapturingTransport final : public exec::Transport {
 public:
  CapturingTransport(std::unique_ptr<exec::Transport> inner, CapturingCpuDevice& device)
      : inner_(std::move(inner)), device_(device) {}

  int64_t host_posts = 0;  // transfers the host posted itself (not recorded)

  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  std::string Name() const override { return "capturing " + inner_->Name(); }
  std::chrono::nanoseconds deadline() const override { return inner_->deadline(); }

  using exec::Transport::Irecv;
  using exec::Transport::Isend;
  Request Isend(const void* data, int64_t count, exec::ElementType type, int peer, int64_t tag) override {
    return Post([=, this] { return inner_->Isend(data, count, type, peer, tag); }, false);
  }
  Request Irecv(void* data, int64_t count, exec::ElementType type, int peer, int64_t tag) override {
    return Post([=, this] { return inner_->Irecv(data, count, type, peer, tag); }, true);
  }

  bool Test(Request request) override {
    Transfer& t = transfers_[request];
    if (!book_.Captured(request)) {
      if (!inner_->Test(t.inner)) return false;
      completed_ns_ = inner_->CompletedNs();
    } else if (!book_.Joined(request)) {
      return false;
    } else {
      completed_ns_ = -1;
    }
    Release(request);
    return true;
  }
  void Wait(Request request) override {
    book_.CheckWaitable(request, -1);
    if (!book_.Captured(request)) {
      inner_->Wait(transfers_[request].inner);
      completed_ns_ = inner_->CompletedNs();
    } else {
      completed_ns_ = -1;
    }
    Release(request);
  }
  int64_t CompletedNs() const override { return completed_ns_; }
  // A recorded receive's consumer waits inside the launch; the host carries out the others.
  bool OrderAfter(Request request) override {
    if (!book_.Captured(request) || !transfers_[request].recv) return false;
    if (book_.OrderNow(request)) RecordWait(transfers_[request]);
    return true;
  }

  bool CapturesTransfers() const override { return true; }
  void BeginCapture() override { book_.Begin(); }
  void EndCapture() override {
    for (const Request r : book_.End()) RecordWait(transfers_[r]);
  }
  void AbandonCapture() noexcept override {
    for (const Request r : book_.Abandon()) Release(r);
  }
  int CaptureStamp(Request request) const override { return book_.StampOf(request); }

  void Barrier() override { inner_->Barrier(); }
  bool EveryRank(bool mine) override { return inner_->EveryRank(mine); }
  std::vector<std::string> Gather(const std::string& mine, int root) override { return inner_->Gather(mine, root); }
  void Broadcast(std::string* text, int root) override { inner_->Broadcast(text, root); }
  [[noreturn]] void Abort(int exit_code) override {
    inner_->Abort(exit_code);
    std::_Exit(exit_code);  // the inner Abort does not return; this only satisfies [[noreturn]]
  }

 private:
  struct Transfer {
    Request inner = -1;  // the inner transport's request (a transfer the host posted)
    bool recv = false;
    size_t slot = 0;  // recorded: where each launch keeps the inner request
  };

  template <class PostFn>
  Request Post(PostFn post, bool recv) {
    Transfer t;
    t.recv = recv;
    if (!book_.open()) {
      ++host_posts;
      t.inner = post();
      const Request request = transfers_.Add(t);
      book_.Posted(request, -1);
      return request;
    }
    t.slot = slots_.size();
    slots_.push_back(-1);
    device_.RecordCall([this, post, slot = t.slot] { slots_[slot] = post(); });
    const int stamp = device_.clock().Stamp();
    const Request request = transfers_.Add(t);
    book_.Posted(request, stamp);
    return request;
  }
  void RecordWait(const Transfer& t) {
    device_.RecordCall([this, slot = t.slot] { inner_->Wait(slots_[slot]); });
  }
  void Release(Request request) {
    transfers_.Release(request);
    book_.Released(request);
  }

  std::unique_ptr<exec::Transport> inner_;
  CapturingCpuDevice& device_;
  exec::HandlePool<Transfer> transfers_;
  exec::CaptureBook book_;
  std::vector<Request> slots_;  // by recorded transfer: its inner request at the latest launch
  int64_t completed_ns_ = -1;
};

}  // namespace stagecraft::testing
