// Tests for sim/src/transfers.cpp: rendezvous, latency, and link sharing worked by hand on one
// node of 100 GB/s links (100 MB take 1 ms alone). A route goes device -> node switch ->
// device, so transfers leaving the same device share its uplink, and transfers into the same
// device share its downlink.
#include "stagecraft/sim/transfers.h"

#include <cstddef>
#include <optional>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "sim_test_util.h"

namespace stagecraft::sim {
namespace {

using testing::kMs;
using testing::Node;
using testing::Script;

constexpr int64_t kBytes = 100'000'000;  // 1 ms at 100 GB/s

// Transfers on a machine, posted by a script; records when each starts and arrives.
class Bench final : public Transfers::Listener {
 public:
  explicit Bench(Topology machine, int64_t p2p_latency_ns = 0)
      : topology(std::move(machine)),
        transfers(topology, p2p_latency_ns, 8, &loop, this),
        script(&loop),
        started(8, -1),
        arrived(8, -1) {}

  // Both ends of transfer `slot` at `time_ns`.
  void Both(int64_t time_ns, size_t slot, int src, int dst, int64_t bytes = kBytes) {
    One(time_ns, slot, Transfers::End::kSend, src, dst, bytes);
    One(time_ns, slot, Transfers::End::kRecv, src, dst, bytes);
  }
  void One(int64_t time_ns, size_t slot, Transfers::End end, int src, int dst, int64_t bytes = kBytes) {
    script.At(time_ns, [=, this] { transfers.Post(slot, end, src, dst, bytes); });
  }

  void TransferStarted(size_t slot) override { started[slot] = loop.now_ns(); }
  void TransferArrived(size_t slot) override { arrived[slot] = loop.now_ns(); }

  Topology topology;
  EventLoop loop;
  Transfers transfers;
  Script script;
  std::vector<int64_t> started, arrived;
};

// One transfer of 100 MB: both ends posted at `post_ns`, from device `src` to device `dst`.
struct Posting {
  int64_t post_ns;
  int src, dst;
};
using Times = std::vector<int64_t>;

// When each transfer (slot = its position) arrives on `machine`.
Times Arrivals(Topology machine, const std::vector<Posting>& postings) {
  Bench bench(std::move(machine));
  for (size_t slot = 0; slot < postings.size(); ++slot) {
    bench.Both(postings[slot].post_ns, slot, postings[slot].src, postings[slot].dst);
  }
  bench.loop.Run();
  return Times(bench.arrived.begin(), bench.arrived.begin() + static_cast<std::ptrdiff_t>(postings.size()));
}

// Latency of the route (2 us) plus the cost table's p2p latency (0.5 us), then 1 ms of data.
TEST(Transfers, OneTransferTakesLatencyThenBytesOverBandwidth) {
  Bench bench(Node(2, 100e9, 2000), 500);
  bench.Both(0, 0, 0, 1);
  bench.loop.Run();
  EXPECT_EQ(bench.started[0], 0);
  EXPECT_EQ(bench.arrived[0], 2000 + 500 + kMs);
}

TEST(Transfers, ZeroBytesArriveAfterTheLatency) {
  Bench bench(Node(2, 100e9, 2000), 500);
  bench.Both(0, 0, 0, 1, 0);
  bench.loop.Run();
  EXPECT_EQ(bench.arrived[0], 2500);
}

// A rendezvous: the send posted at 0 waits for the receive posted at 300 ns.
TEST(Transfers, StartsWhenTheSecondEndIsPosted) {
  Bench bench(Node(2));
  bench.One(0, 0, Transfers::End::kSend, 0, 1);
  bench.One(300, 0, Transfers::End::kRecv, 0, 1);
  bench.loop.Run();
  EXPECT_EQ(bench.started[0], 300);
  EXPECT_EQ(bench.arrived[0], 300 + kMs);
}

// Two transfers from device 0 to device 1 share both links at 50 GB/s each: 2 ms, twice the
// 1 ms either takes alone.
TEST(Transfers, TwoTransfersSharingALinkTakeTwiceAsLong) {
  EXPECT_EQ(Arrivals(Node(2), {{0, 0, 1}}), (Times{kMs}));
  EXPECT_EQ(Arrivals(Node(2), {{0, 0, 1}, {0, 0, 1}}), (Times{2 * kMs, 2 * kMs}));
}

// A: 0 -> 1 and B: 0 -> 2 from t = 0 share device 0's uplink at 50 GB/s; by 0.5 ms each has
// moved 25 MB. C: 0 -> 1 joins at 0.5 ms: the uplink carries three (33.3 GB/s each), device 1's
// downlink two (50), so all three move at 33.3 GB/s and A and B finish their 75 MB at
// 0.5 + 2.25 = 2.75 ms. By then C has moved 75 MB; alone it does the last 25 MB at 100 GB/s in
// 0.25 ms: 3 ms.
TEST(Transfers, ThirdTransferJoiningMidwayRecomputesRates) {
  EXPECT_EQ(Arrivals(Node(3), {{0, 0, 1}, {0, 0, 2}, {kMs / 2, 0, 1}}), (Times{2'750'000, 2'750'000, 3 * kMs}));
}

// A: 0 -> 1, B: 2 -> 1 and D: 3 -> 1 share device 1's downlink (33.3 GB/s each); C: 0 -> 2
// shares device 0's uplink with A only (50 GB/s each). A moves at its most loaded link's
// 33.3 GB/s, and the uplink share A cannot use is not handed to C: C takes 2 ms. A, B and D
// take 3 ms (C leaving at 2 ms does not speed A up: the downlink still limits it).
TEST(Transfers, MovesAtItsMostLoadedLinksRate) {
  EXPECT_EQ(Arrivals(Node(4), {{0, 0, 1}, {0, 2, 1}, {0, 3, 1}, {0, 0, 2}}), (Times{3 * kMs, 3 * kMs, 3 * kMs, 2 * kMs}));
}

// The latency phase takes no bandwidth. Route latency 1 ms: A (posted at 0) moves data from
// 1 ms, alone at 100 GB/s until B's data joins at 1.5 ms; A then has 50 MB left at 50 GB/s and
// arrives at 2.5 ms. B has moved 50 MB by then and does the rest alone in 0.5 ms: 3 ms.
TEST(Transfers, LatencyPhaseDoesNotShareTheLink) {
  EXPECT_EQ(Arrivals(Node(2, 100e9, kMs), {{0, 0, 1}, {kMs / 2, 0, 1}}), (Times{2'500'000, 3 * kMs}));
}

// Transfers in opposite directions use different directed links and do not slow each other.
TEST(Transfers, OppositeDirectionsDoNotShare) {
  EXPECT_EQ(Arrivals(Node(2), {{0, 0, 1}, {0, 1, 0}}), (Times{kMs, kMs}));
}

// Flows over a node's host link (Topology::HostLinks: 10 GB/s each way, shared by the node's two
// devices): two copies to the host from devices 0 and 1 share it, 10 MB each in 2 ms together; a
// copy back from the host runs on the other direction beside them, 10 MB in 1 ms; a measured
// point-to-point fit times device transfers, never a host flow.
TEST(Transfers, HostFlowsShareTheirNodesHostLink) {
  TopologySpec spec;
  spec.device = DeviceSpec::Flat("test", 1e12, int64_t{1} << 40, 0.5);
  spec.devices_per_node = 2;
  spec.links.push_back({LinkScope::kNode, 100e9, 0});
  spec.host = {.memory_bytes = int64_t{1} << 40, .bandwidth_bytes_per_s = 10e9, .latency_ns = 0};
  for (const bool fitted : {false, true}) {
    SCOPED_TRACE(fitted ? "with a measured p2p fit" : "modelled");
    const Topology machine(spec);
    ASSERT_TRUE(machine.HostLinks(0).has_value());
    ASSERT_EQ(*machine.HostLinks(0), *machine.HostLinks(1));
    const auto [to_host, from_host] = *machine.HostLinks(0);
    const std::vector<int> down{to_host}, up{from_host};
    std::optional<P2pFit> fit;
    if (fitted) fit = P2pFit{.latency_ns = 0, .bytes_per_s = 1e9};  // 10 ms for 10 MB, were it used
    EventLoop loop;
    struct Heard final : Transfers::Listener {
      EventLoop* loop;
      std::vector<int64_t> at = std::vector<int64_t>(3, -1);
      void TransferStarted(size_t) override {}
      void TransferArrived(size_t slot) override { at[slot] = loop->now_ns(); }
    } heard;
    heard.loop = &loop;
    Transfers transfers(machine, 0, 3, &loop, &heard, fit);
    transfers.StartLinkFlow(0, down, 10'000'000);
    transfers.StartLinkFlow(1, down, 10'000'000);
    transfers.StartLinkFlow(2, up, 10'000'000);
    loop.Run();
    EXPECT_EQ(heard.at, (std::vector<int64_t>{2 * kMs, 2 * kMs, kMs}));
  }
}

}  // namespace
}  // namespace stagecraft::sim
