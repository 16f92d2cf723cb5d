// CaptureBook: the books of a transport that records its transfers into step graphs
// (Transport::CapturesTransfers): which requests were posted while a capture was open, which of
// them a consumer already waits for on the device, which the capture's end joined (from then on
// the graph's launches carry them out) and the graph stamp of each one's end. Host logic, tested
// on the CPU; the nccl transport and the tests' capturing transport keep theirs here, each
// recording its own waits on the device when the book says to.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "stagecraft/exec/transport.h"

namespace stagecraft::exec {

class CaptureBook {
 public:
  using Request = Transport::Request;

  bool open() const { return open_; }
  // Transport::BeginCapture. Throws std::logic_error when a capture is already open.
  void Begin() {
    if (open_) throw std::logic_error("a capture is already open");
    open_ = true;
  }
  // Transfer `request` was just posted: while a capture is open it is recorded into it, its end
  // at graph stamp `stamp`; otherwise the host carries it out and nothing is kept.
  void Posted(Request request, int stamp) {
    At(request) = open_ ? Entry{.captured = true, .stamp = stamp} : Entry{};
    if (open_) posted_.push_back(request);
  }
  // Whether `request` was recorded into a capture.
  bool Captured(Request request) const { return Of(request).captured; }
  // Whether a recorded request's capture has closed: it is then complete on the host's books (no
  // wait: the launches carry it out).
  bool Joined(Request request) const { return Of(request).joined; }
  // Before a wait for a recorded request: throws std::logic_error while its capture is open (it
  // runs only when the graph is launched).
  void CheckWaitable(Request request, int64_t tag) const {
    if (Captured(request) && !Joined(request)) {
      throw std::logic_error("a wait for a transfer of the step being captured (tag " + std::to_string(tag) +
                             "): it runs only when the graph is launched");
    }
  }
  // OrderAfter of a recorded receive: whether the caller must record the device's wait on it now
  // (its capture is open and nothing waits on it yet; once joined, the launch before orders it).
  bool OrderNow(Request request) {
    Entry& e = At(request);
    const bool now = !e.joined && !e.ordered;
    e.ordered = true;
    return now;
  }
  // Transport::EndCapture: the requests of the capture the caller must join into the compute
  // stream now (those no consumer waited for: sends, receives not ordered); every request of the
  // capture is joined from now on, and the capture is closed. Throws std::logic_error when none
  // is open.
  std::vector<Request> End() {
    if (!open_) throw std::logic_error("no capture is open");
    std::vector<Request> join;
    for (const Request r : posted_) {
      Entry& e = At(r);
      if (!e.captured) continue;  // released already (a capture's request released before its end)
      if (!e.ordered) join.push_back(r);
      e.ordered = e.joined = true;
    }
    posted_.clear();
    open_ = false;
    return join;
  }
  // Transport::AbandonCapture: the capture is closed and dropped; its requests (still recorded),
  // which the caller releases, are returned.
  std::vector<Request> Abandon() {
    std::vector<Request> dropped;
    dropped.swap(posted_);
    std::erase_if(dropped, [&](Request r) { return !Captured(r); });
    open_ = false;
    return dropped;
  }
  // Transport::CaptureStamp: -1 for a request the host carries out.
  int StampOf(Request request) const { return Of(request).captured ? Of(request).stamp : -1; }
  // Request `request` is released (its handle may name another transfer next).
  void Released(Request request) {
    if (request < 0 || static_cast<size_t>(request) >= entries_.size()) return;
    entries_[static_cast<size_t>(request)] = Entry{};
  }

 private:
  struct Entry {
    bool captured = false;
    bool ordered = false;  // a consumer's wait on the device is recorded
    bool joined = false;   // its capture closed
    int stamp = -1;
  };
  Entry& At(Request request) {
    if (request < 0) throw std::out_of_range("CaptureBook: request " + std::to_string(request));
    if (static_cast<size_t>(request) >= entries_.size()) entries_.resize(static_cast<size_t>(request) + 1);
    return entries_[static_cast<size_t>(request)];
  }
  const Entry& Of(Request request) const {
    static const Entry none;
    return request >= 0 && static_cast<size_t>(request) < entries_.size() ? entries_[static_cast<size_t>(request)]
                                                                          : none;
  }

  std::vector<Entry> entries_;  // by request handle
  std::vector<Request> posted_;  // in the open capture
  bool open_ = false;
};

}  // namespace stagecraft::exec
