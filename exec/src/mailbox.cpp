// The runtime's mailbox (mailbox.h).
#include "stagecraft/exec/mailbox.h"

#include <algorithm>
#include <utility>

#include <fmt/format.h>

#include "stagecraft/base/check.h"

namespace stagecraft::exec {

std::vector<Route> Routes(const schedules::Schedule& schedule, int64_t boundary_floats) {
  std::vector<Route> routes;
  for (int rank = 0; rank < schedule.ranks(); ++rank) {
    for (const schedules::Op& op : schedule.ops[rank]) {
      if (!schedules::IsSend(op.kind)) continue;
      const Route r{rank, op.peer, boundary_floats};
      if (std::find(routes.begin(), routes.end(), r) == routes.end()) routes.push_back(r);
    }
  }
  std::sort(routes.begin(), routes.end(),
            [](const Route& a, const Route& b) { return std::pair(a.from, a.to) < std::pair(b.from, b.to); });
  return routes;
}

Mailbox::Mailbox(const schedules::Schedule& schedule, int rank, Device& device, Transport& transport, OpClock& clock,
                 int64_t boundary_floats, std::vector<schedules::OpTiming>* times)
    : ops_(schedule.ops.at(rank)),
      microbatches_(schedule.microbatches),
      units_(schedule),
      device_(device),
      transport_(transport),
      clock_(clock),
      boundary_floats_(boundary_floats),
      times_(times) {
  SC_CHECK(times_->size() == ops_.size(), "one op time per op of the rank");
}

Mailbox::Stamps Mailbox::Post(int op, const schedules::Edge& edge) {
  const int64_t key = Key(edge);
  const schedules::Op& o = ops_[op];
  Pending p;
  p.op = op;
  Stamps stamps;
  if (schedules::IsSend(o.kind)) {
    auto it = waiting_.find(key);
    SC_CHECK(it != waiting_.end(), "a SEND follows the op that produced its tensor");
    p.buffer = std::move(it->second);
    waiting_.erase(it);
    stamps.start = clock_.Mark(op);
    p.request = transport_.Isend(p.buffer.data(), p.buffer.size(), o.peer, key);
    stamps.end = p.end_stamp = transport_.CaptureStamp(p.request);
    sends_.push_back(std::move(p));
    return stamps;
  }
  p.buffer = Buffer(device_, boundary_floats_);
  stamps.start = clock_.Mark(op);
  p.request = transport_.Irecv(p.buffer.data(), p.buffer.size(), o.peer, key);
  stamps.end = p.end_stamp = transport_.CaptureStamp(p.request);
  recvs_.emplace(key, std::move(p));
  return stamps;
}

Buffer Mailbox::Take(const schedules::Edge& edge) {
  const int64_t key = Key(edge);
  if (auto it = waiting_.find(key); it != waiting_.end()) {
    Buffer b = std::move(it->second);
    waiting_.erase(it);
    return b;
  }
  auto it = recvs_.find(key);
  SC_CHECK(it != recvs_.end(), "every compute input is produced locally or received");
  Pending& p = it->second;
  if (!p.done && transport_.OrderAfter(p.request)) {
    Buffer b = std::move(p.buffer);
    ordered_.push_back(std::move(p));  // the consumer waits on the device; a poll completes it
    recvs_.erase(it);
    return b;
  }
  Finish(p);  // a wait that throws leaves the buffer with its receive
  Buffer b = std::move(p.buffer);
  recvs_.erase(it);
  return b;
}

void Mailbox::Finish(Pending& p) {
  if (p.done) return;
  NamingTimeout([&] { transport_.Wait(p.request); }, [&] {
    const schedules::Op& o = ops_[p.op];
    return fmt::format("{} (step {}) {} rank {}", schedules::ActionString(o, microbatches_), o.step,
                       schedules::IsSend(o.kind) ? "to" : "from", o.peer);
  });
  Complete(p);
}

void Mailbox::Poll() {
  for (size_t j = 0; j < sends_.size();) {
    if (transport_.Test(sends_[j].request)) {
      Complete(sends_[j]);
      sends_[j] = std::move(sends_.back());
      sends_.pop_back();
    } else {
      ++j;
    }
  }
  for (auto& [key, p] : recvs_) {
    if (!p.done && transport_.Test(p.request)) Complete(p);
  }
  std::erase_if(ordered_, [&](Pending& p) {
    if (!transport_.Test(p.request)) return false;
    Complete(p);
    return true;
  });
}

void Mailbox::FinishReceives() {
  for (Pending& p : ordered_) Finish(p);
  ordered_.clear();
}

void Mailbox::FinishCaptured() {
  std::erase_if(sends_, [&](Pending& p) {
    if (p.end_stamp < 0) return false;
    Finish(p);
    return true;
  });
}

void Mailbox::FinishSends() {
  for (Pending& p : sends_) Finish(p);
  sends_.clear();
  FinishReceives();
}

}  // namespace stagecraft::exec
