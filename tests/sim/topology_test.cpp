// Tests for sim/src/topology.cpp: link numbering and routes worked by hand for a 2-node x
// 4-device machine and for small explicit graphs, including ties and bad graphs; the
// per-dimension form's routes against Dijkstra's search over a sweep of shapes and ties; a
// machine of 10^4 devices.
#include "stagecraft/sim/topology.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <thread>
#include <vector>

#include "sim_test_util.h"

namespace stagecraft::sim {
namespace {

using testing::ErrorOf;

TopologySpec TwoByFour() {
  TopologySpec spec;
  spec.device = DeviceSpec::Flat("H100", 989e12, 80LL << 30, 0.5);
  spec.nodes = 2;
  spec.devices_per_node = 4;
  spec.links = {{LinkScope::kNode, 450e9, 2000}, {LinkScope::kCluster, 50e9, 5000}};
  return spec;
}

// Physical links: device d to its node switch is k = d, device d to the cluster switch is
// k = 8 + d; directed ids are 2k (device -> switch) and 2k + 1 (switch -> device).
TEST(Topology, TwoNodesOfFourLinkNumbering) {
  const Topology t(TwoByFour());
  EXPECT_EQ(t.devices(), 8);
  EXPECT_EQ(t.vertices(), 8 + 2 + 1);  // devices, node switches, cluster switch
  ASSERT_EQ(t.links().size(), 32u);
  const Topology::Link& up = t.links()[2 * 5];
  EXPECT_EQ(up.from, t.device_vertex(5));
  EXPECT_EQ(t.vertex_name(up.to), "node1/switch");
  EXPECT_DOUBLE_EQ(up.bandwidth_bytes_per_s, 450e9);
  EXPECT_EQ(up.latency_ns, 1000);  // half the node latency
  const Topology::Link& down = t.links()[2 * (8 + 5) + 1];
  EXPECT_EQ(t.vertex_name(down.from), "cluster/switch");
  EXPECT_EQ(down.to, t.device_vertex(5));
  EXPECT_EQ(down.latency_ns, 2500);  // half the cluster latency
}

TEST(Topology, RouteWithinANode) {
  const Topology t(TwoByFour());
  EXPECT_EQ(t.Route(0, 1), (std::vector<int>{0, 3}));
  EXPECT_EQ(t.RouteLatencyNs(0, 1), 2000);
  EXPECT_DOUBLE_EQ(t.RouteBandwidth(0, 1), 450e9);
  EXPECT_EQ(t.Route(7, 4), (std::vector<int>{14, 9}));
  EXPECT_EQ(t.RouteLatencyNs(7, 4), 2000);
}

TEST(Topology, RouteAcrossNodesUsesTheClusterSwitch) {
  const Topology t(TwoByFour());
  EXPECT_EQ(t.Route(3, 4), (std::vector<int>{2 * (8 + 3), 2 * (8 + 4) + 1}));
  EXPECT_EQ(t.RouteLatencyNs(3, 4), 5000);
  EXPECT_DOUBLE_EQ(t.RouteBandwidth(3, 4), 50e9);
  EXPECT_EQ(t.Route(6, 1), (std::vector<int>{2 * (8 + 6), 2 * (8 + 1) + 1}));
  EXPECT_EQ(t.RouteLatencyNs(6, 1), 5000);
}

TEST(Topology, RouteToItselfIsEmpty) {
  const Topology t(TwoByFour());
  EXPECT_TRUE(t.Route(2, 2).empty());
  EXPECT_EQ(t.RouteLatencyNs(2, 2), 0);
  EXPECT_TRUE(std::isinf(t.RouteBandwidth(2, 2)));
}

TEST(Topology, OddLatencySplitsExactly) {
  TopologySpec spec = TwoByFour();
  spec.links[0].latency_ns = 3;
  const Topology t(spec);
  EXPECT_EQ(t.links()[0].latency_ns, 2);
  EXPECT_EQ(t.links()[1].latency_ns, 1);
  EXPECT_EQ(t.RouteLatencyNs(0, 1), 3);
  EXPECT_EQ(t.RouteLatencyNs(1, 0), 3);
}

TEST(Topology, WithoutNodeLinksIntraNodeTrafficUsesTheCluster) {
  TopologySpec spec = TwoByFour();
  spec.links = {{LinkScope::kCluster, 50e9, 5000}};
  const Topology t(spec);
  ASSERT_EQ(t.links().size(), 16u);
  EXPECT_EQ(t.Route(0, 1), (std::vector<int>{0, 3}));
  EXPECT_EQ(t.RouteLatencyNs(0, 1), 5000);
}

TEST(Topology, SingleDevice) {
  TopologySpec spec;
  spec.device = DeviceSpec::Flat("cpu", 1e9, 1 << 30, 1.0);
  const Topology t(spec);
  EXPECT_EQ(t.devices(), 1);
  EXPECT_TRUE(t.links().empty());
  EXPECT_TRUE(t.Route(0, 0).empty());
}

TEST(Topology, PerDimensionErrors) {
  TopologySpec spec = TwoByFour();
  spec.links = {{LinkScope::kNode, 450e9, 2000}};
  EXPECT_EQ(ErrorOf([&] { Topology t(spec); }), "topology has 2 nodes but no link with scope 'cluster'");
  spec.nodes = 1;
  spec.links = {};
  EXPECT_EQ(ErrorOf([&] { Topology t(spec); }), "topology has 4 devices on its node but no link with scope 'node'");
}

// g0 - sw - g1 (1us + 2us, 10 and 20 GB/s) beside a direct g0 - g1 link.
TopologySpec Triangle(int64_t direct_latency_ns, double direct_bandwidth) {
  TopologySpec spec;
  spec.device = DeviceSpec::Flat("gpu", 1e12, 1 << 30, 1.0);
  spec.vertices = {{"g0", VertexKind::kDevice}, {"sw", VertexKind::kSwitch}, {"g1", VertexKind::kDevice}};
  spec.graph_links = {
      {"g0", "sw", 10e9, 1000}, {"sw", "g1", 20e9, 2000}, {"g0", "g1", direct_bandwidth, direct_latency_ns}};
  return spec;
}

TEST(Topology, ExplicitGraphTakesTheLowestLatency) {
  const Topology slow_direct(Triangle(10'000, 100e9));
  EXPECT_EQ(slow_direct.devices(), 2);
  EXPECT_EQ(slow_direct.device_vertex(1), 2);
  ASSERT_EQ(slow_direct.links().size(), 6u);
  EXPECT_EQ(slow_direct.Route(0, 1), (std::vector<int>{0, 2}));
  EXPECT_EQ(slow_direct.Route(1, 0), (std::vector<int>{3, 1}));
  EXPECT_EQ(slow_direct.RouteLatencyNs(0, 1), 3000);
  EXPECT_DOUBLE_EQ(slow_direct.RouteBandwidth(0, 1), 10e9);

  const Topology fast_direct(Triangle(2999, 1e9));
  EXPECT_EQ(fast_direct.Route(0, 1), (std::vector<int>{4}));
  EXPECT_EQ(fast_direct.Route(1, 0), (std::vector<int>{5}));
  EXPECT_EQ(fast_direct.RouteLatencyNs(0, 1), 2999);
  EXPECT_DOUBLE_EQ(fast_direct.RouteBandwidth(0, 1), 1e9);
}

TEST(Topology, EqualLatencyTieGoesToTheWiderRoute) {
  // Through the switch: 1/10e9 + 1/20e9 s per byte; direct at 3us: 1/5e9 (narrower) or 1/100e9.
  EXPECT_EQ(Topology(Triangle(3000, 5e9)).Route(0, 1), (std::vector<int>{0, 2}));
  EXPECT_EQ(Topology(Triangle(3000, 100e9)).Route(0, 1), (std::vector<int>{4}));
}

TEST(Topology, ExplicitGraphErrors) {
  TopologySpec spec = Triangle(1000, 1e9);
  spec.graph_links.pop_back();
  spec.graph_links.pop_back();
  EXPECT_EQ(ErrorOf([&] { Topology t(spec); }), "device 1 (g1) cannot reach device 0 (g0)");
  spec = Triangle(1000, 1e9);
  spec.graph_links[0].b = "nowhere";
  EXPECT_EQ(ErrorOf([&] { Topology t(spec); }), "topology link names unknown vertex 'nowhere'");
  spec = Triangle(1000, 0.0);
  EXPECT_EQ(ErrorOf([&] { Topology t(spec); }), "link g0 - g1: bandwidth must be > 0");
}

// The per-dimension form answers without a search; over nodes, devices, odd latencies, zero
// latencies and exact ties between the node and the cluster switch, every route is the one
// Dijkstra's search settles.
TEST(Topology, PerDimensionRoutesAreTheSearchsRoutes) {
  const std::vector<std::pair<double, int64_t>> links = {{50e9, 0}, {50e9, 1}, {50e9, 3}, {450e9, 2000}, {1e3, 5000},
                                                         {1e16, 2000}};
  int compared = 0;
  for (int nodes : {1, 2, 3}) {
    for (int per_node : {1, 2, 4}) {
      for (size_t n = 0; n <= links.size(); ++n) {  // n == links.size(): no node links
        for (const auto& [cluster_bandwidth, cluster_latency] : links) {
          TopologySpec spec;
          spec.device = DeviceSpec::Flat("d", 1e12, 1 << 30, 1.0);
          spec.nodes = nodes;
          spec.devices_per_node = per_node;
          if (n < links.size()) spec.links.push_back({LinkScope::kNode, links[n].first, links[n].second});
          if (nodes > 1) spec.links.push_back({LinkScope::kCluster, cluster_bandwidth, cluster_latency});
          if (nodes == 1 && per_node > 1 && n == links.size()) continue;  // needs node links
          const Topology t(spec);
          for (int a = 0; a < t.devices(); ++a) {
            for (int b = 0; b < t.devices(); ++b) {
              EXPECT_EQ(t.Route(a, b), t.RouteBySearch(a, b)) << nodes << "x" << per_node << " " << a << "->" << b;
              ++compared;
            }
          }
          if (nodes == 1) break;  // the cluster link is not used
        }
      }
    }
  }
  EXPECT_GT(compared, 1000);
  // An exact tie (same latency and bandwidth in both scopes) goes through the node switch.
  TopologySpec tie = TwoByFour();
  tie.links = {{LinkScope::kNode, 50e9, 2000}, {LinkScope::kCluster, 50e9, 2000}};
  EXPECT_EQ(Topology(tie).Route(0, 1), (std::vector<int>{0, 3}));
  EXPECT_EQ(Topology(tie).RouteBySearch(0, 1), (std::vector<int>{0, 3}));
}

// Routes are kept per pair asked for: 10^4 devices on one node route to their neighbours
// through the node switch (the old table of every pair took 5.5 GB here).
TEST(Topology, TenThousandDevices) {
  TopologySpec spec;
  spec.device = DeviceSpec::Flat("d", 1e12, 1 << 30, 1.0);
  spec.devices_per_node = 10'000;
  spec.links = {{LinkScope::kNode, 100e9, 3}};
  const Topology t(spec);
  EXPECT_EQ(t.devices(), 10'000);
  EXPECT_EQ(t.links().size(), 20'000u);
  for (int d = 0; d + 1 < t.devices(); ++d) {
    ASSERT_EQ(t.Route(d, d + 1), (std::vector<int>{2 * d, 2 * (d + 1) + 1}));
    ASSERT_EQ(t.Route(d + 1, d), (std::vector<int>{2 * (d + 1), 2 * d + 1}));
  }
  EXPECT_EQ(t.RouteLatencyNs(9'998, 9'999), 3);
  EXPECT_EQ(t.RouteBySearch(0, 9'999), (std::vector<int>{0, 2 * 9'999 + 1}));
}

TEST(Topology, LinkRangesAreChecked) {
  TopologySpec spec = TwoByFour();
  spec.links[0].bandwidth_bytes_per_s = 999;
  EXPECT_EQ(ErrorOf([&] { Topology t(spec); }),
            "link node0/device0 - node0/switch: bandwidth must be from 1KB/s to 10PB/s, got 999 B/s");
  spec.links[0].bandwidth_bytes_per_s = 1e3;
  EXPECT_EQ(ErrorOf([&] { Topology t(spec); }), "");
  spec.links[1].bandwidth_bytes_per_s = 1.0001e16;
  EXPECT_EQ(ErrorOf([&] { Topology t(spec); }),
            "link node0/device0 - cluster/switch: bandwidth must be from 1KB/s to 10PB/s, got 1.0001e+16 B/s");
  spec = Triangle(3'600'000'000'001, 1e9);
  EXPECT_EQ(ErrorOf([&] { Topology t(spec); }), "link g0 - g1: latency must be at most 1 h");
  EXPECT_EQ(ErrorOf([&] { Topology t(Triangle(3'600'000'000'000, 1e9)); }), "");
}

TEST(Topology, RoutesFromManyThreadsAgree) {
  const Topology t(TwoByFour());
  std::vector<std::vector<int64_t>> latencies(4);
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&, i] {
      for (int src = 0; src < 8; ++src) {
        for (int dst = 0; dst < 8; ++dst) latencies[i].push_back(t.RouteLatencyNs(src, dst));
      }
    });
  }
  for (auto& thread : threads) thread.join();
  for (int i = 1; i < 4; ++i) EXPECT_EQ(latencies[i], latencies[0]);
  EXPECT_EQ(latencies[0][0 * 8 + 5], 5000);
  EXPECT_EQ(latencies[0][4 * 8 + 7], 2000);
}

}  // namespace
}  // namespace stagecraft::sim
