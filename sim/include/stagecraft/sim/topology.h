// The machine as a graph of devices, switches and directed links (DESIGN.md §4): transfers
// follow the lowest-latency route (Boost.Graph Dijkstra) and share the links on it. Only the
// routes asked for are kept, so memory grows with the links and the pairs that talk, not with
// the square of the devices.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "stagecraft/base/error.h"
#include "stagecraft/scenario/topology_spec.h"

namespace stagecraft::sim {

// Per-dimension form (TopologySpec without vertices): devices are numbered node-major (device
// d sits on node d / devices_per_node; with node groups, group by group, TopologySpec::NodeOf);
// each node has a switch and there is one cluster switch.
// Every device has a full-duplex link to its node switch (the "node" LinkSpec; present when
// the spec has one) and, when nodes > 1, one to the cluster switch (the "cluster" LinkSpec).
// Each of those links has half the scope latency, so a device-to-device route through one
// switch totals the scope latency. Explicit form: the vertices and links as given.
//
// Link ids: every physical link is two directed links, 2k (a -> b) and 2k + 1 (b -> a), where
// for the per-dimension form a is the device. Which device runs which rank: SimConfig::rank_devices.
class Topology {
 public:
  struct Link {
    double bandwidth_bytes_per_s = 0;
    int64_t latency_ns = 0;
    int from = 0;  // vertex ids, see vertex_name()
    int to = 0;
  };

  // Throws stagecraft::InputError when some device cannot reach another, a link's bandwidth or
  // latency is outside its range (limits.h), or (explicit form) a link names an unknown vertex.
  explicit Topology(const TopologySpec& spec);
  ~Topology();
  Topology(Topology&&) noexcept;
  Topology& operator=(Topology&&) noexcept;

  int devices() const { return devices_; }
  int vertices() const { return static_cast<int>(vertex_names_.size()); }
  const std::string& vertex_name(int vertex) const { return vertex_names_[vertex]; }
  int device_vertex(int device) const { return device_vertices_[device]; }
  const std::vector<Link>& links() const { return links_; }
  // The link between device `device`'s node and its host (topology.host, per-dimension form):
  // its directed ids (to the host, from the host), shared by the node's devices and on no
  // device-to-device route; none without a host.
  std::optional<std::pair<int, int>> HostLinks(int device) const;
  // The directed links a copy between device `device` and its host crosses, each way (to the
  // host, from the host): the device's own port when topology.host.device_bandwidth is stated,
  // then its node's host link; none without a host.
  std::optional<std::pair<std::vector<int>, std::vector<int>>> HostPath(int device) const;
  // The node a device sits on in the per-dimension form; -1 for an explicit graph.
  int NodeOf(int device) const { return per_dimension_ ? per_dimension_->node_of[static_cast<size_t>(device)] : -1; }

  // Directed link ids from src to dst along the lowest-latency path; ties go to the route with
  // the least serialization time (sum of 1/bandwidth), then to the one Dijkstra settles first.
  // Empty when src == dst. Computed once per pair asked for and kept (the reference stays valid
  // as long as the topology); safe to call from several threads.
  const std::vector<int>& Route(int src_device, int dst_device) const;
  int64_t RouteLatencyNs(int src_device, int dst_device) const;  // sum over the route; 0 if src == dst
  double RouteBandwidth(int src_device, int dst_device) const;   // min over the route; +inf if src == dst

  // The route by Dijkstra's search over the whole graph, stopped once dst is settled: what
  // Route returns. Route answers the per-dimension form without a search (its routes have two
  // links: through the node switch or the cluster switch), which tests hold against this.
  std::vector<int> RouteBySearch(int src_device, int dst_device) const;

 private:
  struct RouteCache;
  // The per-dimension form's route, worked out from its shape (see RouteBySearch).
  std::vector<int> PerDimensionRoute(int src_device, int dst_device) const;

  // Set for the per-dimension form.
  struct PerDimension {
    std::vector<int> node_of;  // device -> node
    bool node_links = false, cluster_links = false;
    int cluster_base = 0;  // physical link id of device 0's cluster link
    int host_base = -1;    // physical link id of node 0's host link; -1: no host
    int port_base = -1;    // physical link id of device 0's own port to its host; -1: none
  };

  std::optional<PerDimension> per_dimension_;
  int devices_ = 0;
  std::vector<std::string> vertex_names_;
  std::vector<int> device_vertices_;  // device -> vertex
  std::vector<Link> links_;
  std::unique_ptr<RouteCache> cache_;
};

}  // namespace stagecraft::sim
