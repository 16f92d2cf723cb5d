// A Transport for tests that run without MPI: every send and receive is recorded, a transfer
// completes only when the test says so (Complete) or when it is waited for, and collectives
// answer as a world of `size` ranks that all agree. Receives land in host memory (cpu device).
// A test may say when a transfer completed on the device (completed_ns), as a transport that
// times its transfers there reports it, and whether receives order the device after them
// (orders_on_device: OrderAfter, as nccl's do) instead of being waited for; Prepare's routes
// are kept. AgreeingTransport, its base, is the world of a test double whose transfers complete
// when posted and whose ranks all agree.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "stagecraft/exec/transport.h"

namespace stagecraft::testing {

// A transport's test double whose transfers are complete when posted (Test is true, Wait
// returns at once) in a world that agrees with this rank: a barrier returns at once, EveryRank
// is this rank's answer, a gather is this rank's string alone and a broadcast leaves the string
// as it is. Abort ends the process at once.
class AgreeingTransport : public exec::Transport {
 public:
  bool Test(Request) override { return true; }
  void Wait(Request) override {}
  void Barrier() override {}
  bool EveryRank(bool mine) override { return mine; }
  std::vector<std::string> Gather(const std::string& mine, int) override { return {mine}; }
  void Broadcast(std::string*, int) override {}
  [[noreturn]] void Abort(int exit_code) override { std::_Exit(exit_code); }
};

class FakeTransport final : public AgreeingTransport {
 public:
  struct Posted {
    bool send = false;
    float* recv_data = nullptr;  // a receive's destination
    int64_t count = 0;
    int peer = 0;
    int64_t tag = 0;
    bool complete = false;
    exec::ElementType type = exec::ElementType::kF32;
    const void* send_data = nullptr;  // what a send was handed
  };

  explicit FakeTransport(int rank = 0, int size = 1) : rank_(rank), size_(size) {}

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string Name() const override { return "fake"; }
  using exec::Transport::Irecv;
  using exec::Transport::Isend;
  Request Isend(const void* data, int64_t count, exec::ElementType type, int peer, int64_t tag) override {
    posted.push_back({true, nullptr, count, peer, tag, false, type, data});
    return static_cast<Request>(posted.size() - 1);
  }
  // Only an fp32 receive's data are written by Complete.
  Request Irecv(void* data, int64_t count, exec::ElementType type, int peer, int64_t tag) override {
    float* floats = type == exec::ElementType::kF32 ? static_cast<float*>(data) : nullptr;
    posted.push_back({false, floats, count, peer, tag, false, type});
    return static_cast<Request>(posted.size() - 1);
  }
  bool Test(Request request) override {
    ++tests;
    return posted.at(request).complete;
  }
  void Wait(Request request) override {
    ++waits;
    if (wait_times_out) throw exec::TimeoutError("no message within the deadline");
    Complete(request);
  }
  // Completes a transfer; a receive's data become `value`.
  void Complete(Request request, float value = 1.0f) {
    Posted& p = posted.at(request);
    p.complete = true;
    for (int64_t i = 0; i < p.count && p.recv_data != nullptr; ++i) p.recv_data[i] = value;
  }

  int64_t CompletedNs() const override { return completed_ns; }
  void Prepare(const std::vector<exec::Route>& routes) override {
    prepared.push_back(routes);
    posted_at_prepare.push_back(posted.size());
  }
  // A receive ordered on the device holds its data by the time the device's consumer runs: on
  // the cpu, whose consumer runs as it is called, they are written now (the value Complete
  // writes), not left as whatever the buffer held.
  bool OrderAfter(Request request) override {
    if (!orders_on_device) return false;
    ordered.push_back(request);
    const Posted& p = posted.at(request);
    for (int64_t i = 0; i < p.count && p.recv_data != nullptr; ++i) p.recv_data[i] = 1.0f;
    return true;
  }
  std::chrono::nanoseconds deadline() const override { return wait_deadline; }
  void Flush() override { posted_at_flush.push_back(posted.size()); }

  std::vector<Posted> posted;  // by request
  int tests = 0;
  int waits = 0;
  bool wait_times_out = false;
  int64_t completed_ns = -1;  // CompletedNs: a device's time of the last completion, or none
  bool orders_on_device = false;
  std::vector<Request> ordered;                       // OrderAfter's, in order
  std::vector<std::vector<exec::Route>> prepared;     // each Prepare's routes
  std::vector<size_t> posted_at_prepare;              // how many transfers were posted by each Prepare
  std::vector<size_t> posted_at_flush;                // how many transfers were posted by each Flush
  std::chrono::nanoseconds wait_deadline = exec::kDefaultWaitDeadline;

 private:
  int rank_;
  int size_;
};

}  // namespace stagecraft::testing
