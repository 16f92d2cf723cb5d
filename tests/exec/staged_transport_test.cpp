// The host-staged transport (staged_transport.h) on a cpu device whose copies between the tiers
// wait on their stream until the test runs them, as a GPU's copy streams do, over a fake inner
// transport: the host never waits for the device's queue (Upload and Download, which would,
// throw), a send is posted only once its copy has run, a received message reaches its buffer
// through the to-device stream between the compute work before and after it, and a host buffer
// is not handed out again while a queued copy still reads it.
#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "fake_transport.h"
#include "stagecraft/exec/cpu_device.h"
#include "stagecraft/exec/staged_transport.h"

namespace stagecraft::exec {
namespace {

using Order = std::pair<StreamKind, StreamKind>;  // (waiter, producer)

class QueuedCopiesDevice final : public Device {
 public:
  std::string Name() const override { return "cpu (queued copies)"; }
  DeviceMemory& memory() override { return memory_; }
  DeviceStreams& streams() override { return streams_; }
  DeviceClock& clock() override { return inner_->clock(); }
  const LayerOps& ops() const override { return inner_->ops(); }
  OpContext& op_context() override { return inner_->op_context(); }

  // Runs the copies queued on `stream`: all, or the first alone.
  void Run(StreamKind stream) {
    while (!queue(stream).empty()) RunOne(stream);
  }
  void RunOne(StreamKind stream) {
    std::deque<std::function<void()>>& q = queue(stream);
    ASSERT_FALSE(q.empty());
    q.front()();
    q.pop_front();
    ++ran_[static_cast<size_t>(stream)];
  }
  size_t queued(StreamKind stream) { return queue(stream).size(); }
  std::vector<Order> orders;  // OrderAfter's calls, in order
  int synchronized = 0;       // Synchronize calls of a copy stream

 private:
  std::deque<std::function<void()>>& queue(StreamKind s) { return queues_[static_cast<size_t>(s)]; }
  // A fence: its stream and how many copies queued there it follows.
  struct Fence {
    StreamKind stream;
    int64_t after;
  };

  class Memory final : public DeviceMemory {
   public:
    explicit Memory(QueuedCopiesDevice& d) : d_(d) {}
    float* Allocate(int64_t floats, MemoryTier tier) override { return inner().Allocate(floats, tier); }
    void Free(float* data, int64_t floats, MemoryTier tier) override { inner().Free(data, floats, tier); }
    void Upload(float*, const float*, int64_t) override { throw std::logic_error("Upload waits for the queue"); }
    void Download(float*, const float*, int64_t) override { throw std::logic_error("Download waits for the queue"); }
    void Copy(float* dst, const float* src, int64_t n) override { inner().Copy(dst, src, n); }
    void Fill(float* dst, float value, int64_t n) override { inner().Fill(dst, value, n); }
    void CopyAsync(float* dst, MemoryTier dst_tier, const float* src, MemoryTier src_tier, int64_t n,
                   StreamKind stream) override {
      d_.queue(stream).push_back([=, this] { inner().CopyAsync(dst, dst_tier, src, src_tier, n, stream); });
      ++d_.queued_[static_cast<size_t>(stream)];
    }

   private:
    DeviceMemory& inner() { return d_.inner_->memory(); }
    QueuedCopiesDevice& d_;
  };
  class Streams final : public DeviceStreams {
   public:
    explicit Streams(QueuedCopiesDevice& d) : d_(d) {}
    void Synchronize(StreamKind stream) override {
      if (stream != StreamKind::kCompute) ++d_.synchronized;
      d_.Run(stream);
    }
    bool Idle(StreamKind stream) override { return d_.queue(stream).empty(); }
    void OrderAfter(StreamKind waiter, StreamKind producer) override { d_.orders.emplace_back(waiter, producer); }
    void* Native(StreamKind) override { return nullptr; }
    Fence MakeFence(StreamKind stream) override {
      d_.fences_.push_back({stream, d_.queued_[static_cast<size_t>(stream)]});
      return reinterpret_cast<Fence>(d_.fences_.size());  // 1, 2, ...: an index past the null fence
    }
    bool FenceReached(Fence fence) override {
      const auto& f = d_.fences_.at(reinterpret_cast<size_t>(fence) - 1);
      return d_.ran_[static_cast<size_t>(f.stream)] >= f.after;
    }
    void DropFence(Fence) override { ++d_.dropped_fences; }

   private:
    QueuedCopiesDevice& d_;
  };

  std::unique_ptr<Device> inner_ = MakeCpuDevice();
  Memory memory_{*this};
  Streams streams_{*this};
  std::array<std::deque<std::function<void()>>, 3> queues_;
  std::array<int64_t, 3> queued_{}, ran_{};
  std::vector<Fence> fences_;

 public:
  int dropped_fences = 0;
};

class StagedTransportTest : public ::testing::Test {
 protected:
  StagedTransportTest() {
    auto inner = std::make_unique<testing::FakeTransport>(0, 2);
    fake_ = inner.get();
    staged_ = MakeStagedTransport(std::move(inner), device_);
  }
  // Each test runs the copies it queued: one left would write a buffer the test has freed.
  ~StagedTransportTest() override {
    EXPECT_EQ(device_.queued(StreamKind::kToHost), 0u);
    EXPECT_EQ(device_.queued(StreamKind::kToDevice), 0u);
  }
  QueuedCopiesDevice device_;
  testing::FakeTransport* fake_ = nullptr;
  std::unique_ptr<Transport> staged_;
};

TEST_F(StagedTransportTest, ASendIsPostedOnceItsCopyToTheHostHasRun) {
  std::vector<float> tensor = {1, 2, 3, 4};
  const Transport::Request send = staged_->Isend(tensor.data(), 4, 1, 7);
  EXPECT_TRUE(fake_->posted.empty()) << "posted before its copy ran";
  EXPECT_EQ(device_.orders, (std::vector<Order>{{StreamKind::kToHost, StreamKind::kCompute}}))
      << "the copy waits for the work that makes the tensor";
  EXPECT_FALSE(staged_->Test(send));
  EXPECT_TRUE(fake_->posted.empty());
  tensor.assign(4, -1.0f);  // the device's buffer is rewritten after its copy was queued
  device_.Run(StreamKind::kToHost);
  EXPECT_FALSE(staged_->Test(send)) << "posted now; the inner send is not complete";
  ASSERT_EQ(fake_->posted.size(), 1u);
  const float* host = static_cast<const float*>(fake_->posted[0].send_data);
  EXPECT_NE(host, tensor.data()) << "the inner transport is handed the host buffer";
  EXPECT_EQ(std::vector<float>(host, host + 4), std::vector<float>(4, -1.0f)) << "what the copy read when it ran";
  EXPECT_EQ(fake_->posted[0].count, 4);
  EXPECT_EQ(fake_->posted[0].peer, 1);
  EXPECT_EQ(fake_->posted[0].tag, 7);
  fake_->Complete(0);
  EXPECT_TRUE(staged_->Test(send));
  EXPECT_EQ(device_.synchronized, 0) << "nothing waited for the device";
}

TEST_F(StagedTransportTest, SendsArePostedInTheOrderTheyWereMade) {
  std::vector<float> a(2, 1.0f), b(2, 2.0f);
  staged_->Isend(a.data(), 2, 1, 1);
  staged_->Isend(b.data(), 2, 1, 2);
  device_.Run(StreamKind::kToHost);
  std::vector<float> c(2);
  staged_->Irecv(c.data(), 2, 1, 3);  // any call of the transport posts what has been copied
  ASSERT_EQ(fake_->posted.size(), 3u);
  EXPECT_EQ(fake_->posted[0].tag, 1);
  EXPECT_EQ(fake_->posted[1].tag, 2);
  EXPECT_FALSE(fake_->posted[2].send);
}

// Each send is posted as soon as its own copy has run: not held back by a later send's copy,
// nor by another copy queued on the same stream after it (an activation's offload).
TEST_F(StagedTransportTest, EachSendIsPostedOnceItsOwnCopyHasRun) {
  std::vector<float> a(2, 1.0f), b(2, 2.0f), offload(2, 0.0f), spill(2);
  staged_->Isend(a.data(), 2, 1, 1);
  staged_->Isend(b.data(), 2, 1, 2);
  device_.memory().CopyAsync(spill.data(), MemoryTier::kHost, offload.data(), MemoryTier::kDevice, 2,
                             StreamKind::kToHost);
  device_.RunOne(StreamKind::kToHost);  // a's copy
  std::vector<float> c(2);
  staged_->Irecv(c.data(), 2, 1, 3);
  ASSERT_EQ(fake_->posted.size(), 2u) << "a's send and the receive";
  EXPECT_EQ(fake_->posted[0].tag, 1);
  device_.RunOne(StreamKind::kToHost);  // b's copy; the offload's still queued
  fake_->Complete(1);                   // the receive
  EXPECT_TRUE(staged_->Test(2));        // the receive's handle (a's and b's are 0 and 1)
  ASSERT_EQ(fake_->posted.size(), 3u);
  EXPECT_EQ(fake_->posted[2].tag, 2);
  device_.Run(StreamKind::kToHost);
  device_.Run(StreamKind::kToDevice);
  EXPECT_EQ(device_.dropped_fences, 2) << "each send's fence, given back once posted";
  std::vector<float> d(2);
  staged_->Irecv(d.data(), 2, 1, 4);  // reclaims the upload's buffer
  EXPECT_EQ(device_.dropped_fences, 3) << "and the upload's, once its buffer is reused";
}

// A Wait (here on a receive) first waits for the queued copies and posts their sends: the peer
// may be waiting for one of them before it sends what this rank waits for.
TEST_F(StagedTransportTest, AWaitPostsTheSendsStillCopyingFirst) {
  std::vector<float> out(3, 5.0f), in(3, 0.0f);
  staged_->Isend(out.data(), 3, 1, 1);
  const Transport::Request recv = staged_->Irecv(in.data(), 3, 1, 2);
  ASSERT_EQ(fake_->posted.size(), 1u) << "the receive alone";
  device_.Run(StreamKind::kToHost);  // the copy has run; no call has seen it yet
  staged_->Wait(recv);
  ASSERT_EQ(fake_->posted.size(), 2u);
  EXPECT_TRUE(fake_->posted[1].send);
  EXPECT_EQ(static_cast<const float*>(fake_->posted[1].send_data)[2], 5.0f);
  device_.Run(StreamKind::kToDevice);
  EXPECT_EQ(in, (std::vector<float>{1, 1, 1})) << "the received message (the fake's 1s), on the device";
}

// A device that never runs a send's copy: the wait for it ends at the deadline, naming the send.
TEST_F(StagedTransportTest, AWaitForACopyTheDeviceNeverRunsEndsAtTheDeadline) {
  fake_->wait_deadline = std::chrono::milliseconds(5);
  std::vector<float> out(2, 1.0f);
  staged_->Isend(out.data(), 2, 1, 11);
  try {
    staged_->Flush();
    ADD_FAILURE() << "Flush returned";
  } catch (const TimeoutError& e) {
    EXPECT_NE(std::string(e.what()).find("host-staged send to rank 1 (tag 11)"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(fake_->posted.empty());
  device_.Run(StreamKind::kToHost);
}

// Flush (the runtime's, before a step's read-back) posts the sends whose copies have run even
// where no other call would see them.
TEST_F(StagedTransportTest, FlushPostsTheSendsStillCopying) {
  std::vector<float> out(2, 4.0f);
  const Transport::Request send = staged_->Isend(out.data(), 2, 1, 9);
  device_.Run(StreamKind::kToHost);  // the device gets there while Flush polls: here, before
  staged_->Flush();
  ASSERT_EQ(fake_->posted.size(), 1u);
  fake_->Complete(0);
  EXPECT_TRUE(staged_->Test(send));
}

TEST_F(StagedTransportTest, AMessageReachesTheDeviceBetweenTheComputeBeforeAndAfterIt) {
  std::vector<float> dst(3, 0.0f);
  const Transport::Request recv = staged_->Irecv(dst.data(), 3, 1, 4);
  ASSERT_EQ(fake_->posted.size(), 1u);
  float* host = fake_->posted[0].recv_data;
  ASSERT_NE(host, dst.data()) << "received into a host buffer";
  EXPECT_FALSE(staged_->Test(recv));
  fake_->Complete(0, 3.0f);
  EXPECT_TRUE(staged_->Test(recv));
  EXPECT_EQ(dst[0], 0.0f) << "the copy to the device is queued, not made by the host";
  EXPECT_EQ(device_.orders, (std::vector<Order>{{StreamKind::kToDevice, StreamKind::kCompute},
                                                {StreamKind::kCompute, StreamKind::kToDevice}}));
  // A receive posted while that copy is queued gets another host buffer.
  std::vector<float> dst2(3, 0.0f);
  staged_->Irecv(dst2.data(), 3, 1, 5);
  EXPECT_NE(fake_->posted[1].recv_data, host) << "a buffer a queued copy reads";
  device_.Run(StreamKind::kToDevice);
  EXPECT_EQ(dst, (std::vector<float>{3, 3, 3}));
  // Once it has run, its buffer is handed out again.
  std::vector<float> dst3(3);
  staged_->Irecv(dst3.data(), 3, 1, 6);
  EXPECT_EQ(fake_->posted[2].recv_data, host);
  EXPECT_EQ(device_.synchronized, 0);
}

}  // namespace
}  // namespace stagecraft::exec
