// Topology graph: builds devices, switches and directed links from a TopologySpec and finds
// lowest-latency routes with Boost.Graph's Dijkstra (or, for the per-dimension form, from its
// shape), kept per pair asked for.
#include "stagecraft/sim/topology.h"

#include <algorithm>
#include <cstdint>
#include <deque>
#include <limits>
#include <map>
#include <mutex>
#include <unordered_map>
#include <utility>

// GCC 12 reports a false maybe-uninitialized inside Boost's edge iterator (boost::optional).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/dijkstra_shortest_paths.hpp>
#include <boost/property_map/property_map.hpp>
#pragma GCC diagnostic pop
#include <fmt/format.h>

#include "stagecraft/base/check.h"
#include "stagecraft/base/error.h"
#include "stagecraft/schedules/ir.h"
#include "stagecraft/scenario/limits.h"

namespace stagecraft::sim {
namespace {

using stagecraft::InputError;

// Route cost: latency first, then serialization time per byte (sum of 1/bandwidth) so that of
// two equally fast routes the wider one wins, deterministically.
using Distance = std::pair<int64_t, double>;

struct EdgeProps {
  int link = 0;
  Distance weight;
};
using Graph = boost::adjacency_list<boost::vecS, boost::vecS, boost::directedS, boost::no_property, EdgeProps>;

// Thrown by the visitor once the target is settled: Dijkstra's search stops there (Boost's
// documented way out). Nothing the search settles later could change the target's route.
struct TargetSettled {};

// Records, for each vertex, the directed link by which Dijkstra last improved it, and stops the
// search when `target` leaves the queue.
class PredecessorRecorder : public boost::default_dijkstra_visitor {
 public:
  PredecessorRecorder(std::vector<int>* pred_link, size_t target) : pred_link_(pred_link), target_(target) {}
  template <class Edge, class G>
  void edge_relaxed(Edge e, const G& g) {
    (*pred_link_)[boost::target(e, g)] = g[e].link;
  }
  template <class Vertex, class G>
  void examine_vertex(Vertex u, const G&) {
    if (static_cast<size_t>(u) == target_) throw TargetSettled{};
  }

 private:
  std::vector<int>* pred_link_;
  size_t target_;
};

uint64_t PairKey(int src, int dst) { return static_cast<uint64_t>(src) << 32 | static_cast<uint32_t>(dst); }

}  // namespace

struct Topology::RouteCache {
  Graph graph;
  std::mutex mutex;
  std::unordered_map<uint64_t, std::vector<int>> routes;  // by PairKey(src, dst); nodes never move
};

namespace {

struct Builder {
  std::vector<std::string> names;
  std::vector<Topology::Link> links;

  int AddVertex(std::string name) {
    names.push_back(std::move(name));
    return static_cast<int>(names.size()) - 1;
  }
  // One full-duplex link: a -> b gets the odd nanosecond of an odd latency so that the two
  // halves of a split scope latency add up exactly.
  void AddLink(int a, int b, double bandwidth, int64_t forward_latency_ns, int64_t backward_latency_ns) {
    if (!(bandwidth > 0)) {
      throw InputError(fmt::format("link {} - {}: bandwidth must be > 0", names[a], names[b]));
    }
    // The ranges of limits.h, for topologies built in code too: they keep every sum of 1/bandwidth
    // along a route exact enough that a longer route never ties a shorter one.
    if (bandwidth < kMinBandwidthBytesPerS || bandwidth > kMaxBandwidthBytesPerS) {
      throw InputError(fmt::format("link {} - {}: bandwidth must be from 1KB/s to 10PB/s, got {:g} B/s", names[a],
                                   names[b], bandwidth));
    }
    if (forward_latency_ns < 0 || backward_latency_ns < 0) {
      throw InputError(fmt::format("link {} - {}: latency must be >= 0", names[a], names[b]));
    }
    if (forward_latency_ns > kMaxOpNs || backward_latency_ns > kMaxOpNs) {
      throw InputError(fmt::format("link {} - {}: latency must be at most 1 h", names[a], names[b]));
    }
    links.push_back({bandwidth, forward_latency_ns, a, b});
    links.push_back({bandwidth, backward_latency_ns, b, a});
  }
};

const LinkSpec* FindScope(const TopologySpec& spec, LinkScope scope) {
  for (const LinkSpec& link : spec.links) {
    if (link.scope == scope) return &link;
  }
  return nullptr;
}

void BuildPerDimension(const TopologySpec& spec, Builder* b, std::vector<int>* device_vertices) {
  const int nodes = spec.node_count();
  if (nodes < 1 || spec.devices() < 1) {
    throw InputError(fmt::format("topology needs nodes >= 1 and devices_per_node >= 1, got {} and {}", spec.nodes,
                                 spec.devices_per_node));
  }
  const LinkSpec* node = FindScope(spec, LinkScope::kNode);
  const LinkSpec* cluster = FindScope(spec, LinkScope::kCluster);
  if (nodes > 1 && cluster == nullptr) {
    throw InputError(fmt::format("topology has {} nodes but no link with scope 'cluster'", nodes));
  }
  if (nodes == 1 && spec.DevicesOnNode(0) > 1 && node == nullptr) {
    throw InputError(
        fmt::format("topology has {} devices on its node but no link with scope 'node'", spec.DevicesOnNode(0)));
  }
  const int devices = spec.devices();
  for (int d = 0; d < devices; ++d) {
    device_vertices->push_back(b->AddVertex(fmt::format("node{}/device{}", spec.NodeOf(d), d)));
  }
  if (node != nullptr) {
    std::vector<int> switches;
    for (int n = 0; n < nodes; ++n) switches.push_back(b->AddVertex(fmt::format("node{}/switch", n)));
    const int64_t up = (node->latency_ns + 1) / 2;
    for (int d = 0; d < devices; ++d) {
      b->AddLink(d, switches[spec.NodeOf(d)], node->bandwidth_bytes_per_s, up, node->latency_ns - up);
    }
  }
  if (nodes > 1) {
    const int cluster_switch = b->AddVertex("cluster/switch");
    const int64_t up = (cluster->latency_ns + 1) / 2;
    for (int d = 0; d < devices; ++d) {
      b->AddLink(d, cluster_switch, cluster->bandwidth_bytes_per_s, up, cluster->latency_ns - up);
    }
  }
}

// Per node, its host link (topology.host): a physical link from the node's devices' side to its
// host; returns the first one's physical id. A copy crosses it alone, so each direction has the
// whole latency.
int AddHostLinks(const TopologySpec& spec, Builder* b) {
  const int base = static_cast<int>(b->links.size()) / 2;
  for (int n = 0; n < spec.node_count(); ++n) {
    const int devices = b->AddVertex(fmt::format("node{}/host-link", n));
    const int host = b->AddVertex(fmt::format("node{}/host", n));
    b->AddLink(devices, host, spec.host.bandwidth_bytes_per_s, spec.host.latency_ns, spec.host.latency_ns);
  }
  return base;
}

void BuildExplicit(const TopologySpec& spec, Builder* b, std::vector<int>* device_vertices) {
  std::map<std::string, int, std::less<>> by_name;
  for (const VertexSpec& v : spec.vertices) {
    if (by_name.count(v.name) != 0) throw InputError(fmt::format("topology vertex '{}' is listed twice", v.name));
    const int id = b->AddVertex(v.name);
    by_name[v.name] = id;
    if (v.kind == VertexKind::kDevice) device_vertices->push_back(id);
  }
  const auto find = [&](const std::string& name) {
    const auto it = by_name.find(name);
    if (it == by_name.end()) throw InputError(fmt::format("topology link names unknown vertex '{}'", name));
    return it->second;
  };
  for (const GraphLinkSpec& link : spec.graph_links) {
    const int a = find(link.a);
    const int c = find(link.b);
    if (a == c) throw InputError(fmt::format("topology link from '{}' to itself", link.a));
    b->AddLink(a, c, link.bandwidth_bytes_per_s, link.latency_ns, link.latency_ns);
  }
}

}  // namespace

std::optional<std::pair<std::vector<int>, std::vector<int>>> Topology::HostPath(int device) const {
  const auto node = HostLinks(device);
  if (!node) return std::nullopt;
  if (per_dimension_->port_base < 0) return std::pair{std::vector<int>{node->first}, std::vector<int>{node->second}};
  const int port = per_dimension_->port_base + device;
  return std::pair{std::vector<int>{2 * port, node->first}, std::vector<int>{node->second, 2 * port + 1}};
}

std::optional<std::pair<int, int>> Topology::HostLinks(int device) const {
  if (!per_dimension_ || per_dimension_->host_base < 0) return std::nullopt;
  const int physical = per_dimension_->host_base + NodeOf(device);
  return std::pair{2 * physical, 2 * physical + 1};
}

Topology::Topology(const TopologySpec& spec) {
  Builder b;
  if (spec.explicit_graph()) {
    BuildExplicit(spec, &b, &device_vertices_);
  } else {
    BuildPerDimension(spec, &b, &device_vertices_);
    PerDimension dim{{}, FindScope(spec, LinkScope::kNode) != nullptr, spec.node_count() > 1,
                     FindScope(spec, LinkScope::kNode) != nullptr ? spec.devices() : 0};
    for (int d = 0; d < spec.devices(); ++d) dim.node_of.push_back(spec.NodeOf(d));
    per_dimension_ = std::move(dim);
  }
  if (device_vertices_.empty()) throw InputError("topology has no devices");
  devices_ = static_cast<int>(device_vertices_.size());
  const size_t routed_links = b.links.size();
  if (per_dimension_ && spec.host.stated()) {
    per_dimension_->host_base = AddHostLinks(spec, &b);
    // Each device's own port to the host: its ceiling; the latency is the node link's, paid once.
    if (spec.host.device_bandwidth_bytes_per_s > 0) {
      per_dimension_->port_base = static_cast<int>(b.links.size()) / 2;
      for (int d = 0; d < devices_; ++d) {
        const int port = b.AddVertex(fmt::format("device{}/host-port", d));
        const int side = b.AddVertex(fmt::format("device{}/host-port-end", d));
        b.AddLink(port, side, spec.host.device_bandwidth_bytes_per_s, 0, 0);
      }
    }
  }
  vertex_names_ = std::move(b.names);
  links_ = std::move(b.links);

  cache_ = std::make_unique<RouteCache>();
  cache_->graph = Graph(vertex_names_.size());
  for (size_t id = 0; id < routed_links; ++id) {  // the host links carry no device-to-device route
    const Link& link = links_[id];
    EdgeProps props{static_cast<int>(id), {link.latency_ns, 1.0 / link.bandwidth_bytes_per_s}};
    boost::add_edge(link.from, link.to, props, cache_->graph);
  }

  // Links are full duplex, so every device reaching device 0 means all pairs are connected.
  std::vector<bool> reached(vertex_names_.size(), false);
  std::deque<int> frontier = {device_vertices_[0]};
  reached[device_vertices_[0]] = true;
  while (!frontier.empty()) {
    const int v = frontier.front();
    frontier.pop_front();
    for (const auto& e : boost::make_iterator_range(boost::out_edges(v, cache_->graph))) {
      const int to = static_cast<int>(boost::target(e, cache_->graph));
      if (!reached[to]) frontier.push_back(to), reached[to] = true;
    }
  }
  for (int d = 1; d < devices_; ++d) {
    if (!reached[device_vertices_[d]]) {
      throw InputError(fmt::format("device {} ({}) cannot reach device 0 ({})", d, vertex_names_[device_vertices_[d]],
                                   vertex_names_[device_vertices_[0]]));
    }
  }
}

Topology::~Topology() = default;
Topology::Topology(Topology&&) noexcept = default;
Topology& Topology::operator=(Topology&&) noexcept = default;

std::vector<int> Topology::RouteBySearch(int src_device, int dst_device) const {
  SC_CHECK(src_device >= 0 && src_device < devices_ && dst_device >= 0 && dst_device < devices_,
           fmt::format("route {} -> {} outside {} devices", src_device, dst_device, devices_));
  const Graph& g = cache_->graph;
  const size_t n = boost::num_vertices(g);
  const int source = device_vertices_[src_device];
  const int target = device_vertices_[dst_device];
  std::vector<Distance> distance(n);
  std::vector<int> pred_link(n, -1);
  const Distance infinity{std::numeric_limits<int64_t>::max(), std::numeric_limits<double>::infinity()};
  try {
    boost::dijkstra_shortest_paths(
        g, static_cast<Graph::vertex_descriptor>(source),
        boost::weight_map(boost::get(&EdgeProps::weight, g))
            .distance_map(boost::make_iterator_property_map(distance.begin(), boost::get(boost::vertex_index, g)))
            .distance_compare(std::less<Distance>())
            .distance_combine([](const Distance& a, const Distance& b) {
              return Distance{a.first + b.first, a.second + b.second};
            })
            .distance_inf(infinity)
            .distance_zero(Distance{0, 0.0})
            .visitor(PredecessorRecorder(&pred_link, static_cast<size_t>(target))));
  } catch (const TargetSettled&) {
    // The target's route is final.
  }
  std::vector<int> route;
  for (int v = target; v != source && pred_link[v] >= 0; v = links_[pred_link[v]].from) route.push_back(pred_link[v]);
  std::reverse(route.begin(), route.end());
  return route;
}

// The per-dimension form has two kinds of routes, each of two links: up to the node switch and
// down (same node), or up to the cluster switch and down. Every longer route adds links, so a
// larger sum of 1/bandwidth (the bandwidth range keeps that sum exact enough to differ) and no
// less latency. Between devices of one node both are there when nodes > 1: the lower (latency,
// sum of 1/bandwidth) wins, computed as the search adds them; on a tie the node switch, which
// the search reaches first (its link comes first in the device's list and ties keep queue order).
std::vector<int> Topology::PerDimensionRoute(int src_device, int dst_device) const {
  const PerDimension& dim = *per_dimension_;
  const auto up = [](int physical) { return 2 * physical; };
  const auto down = [](int physical) { return 2 * physical + 1; };
  const auto cost = [&](int first, int second) {
    const Link& a = links_[first];
    const Link& b = links_[second];
    return Distance{a.latency_ns + b.latency_ns, 1.0 / a.bandwidth_bytes_per_s + 1.0 / b.bandwidth_bytes_per_s};
  };
  const std::vector<int> via_cluster = dim.cluster_links ? std::vector<int>{up(dim.cluster_base + src_device),
                                                                            down(dim.cluster_base + dst_device)}
                                                         : std::vector<int>{};
  const bool same_node = dim.node_of[src_device] == dim.node_of[dst_device];
  if (!same_node || !dim.node_links) return via_cluster;
  const std::vector<int> via_node = {up(src_device), down(dst_device)};
  if (!dim.cluster_links) return via_node;
  return cost(via_cluster[0], via_cluster[1]) < cost(via_node[0], via_node[1]) ? via_cluster : via_node;
}

const std::vector<int>& Topology::Route(int src_device, int dst_device) const {
  SC_CHECK(src_device >= 0 && src_device < devices_ && dst_device >= 0 && dst_device < devices_,
           fmt::format("route {} -> {} outside {} devices", src_device, dst_device, devices_));
  static const std::vector<int> kNone;
  if (src_device == dst_device) return kNone;
  const uint64_t key = PairKey(src_device, dst_device);
  {
    const std::lock_guard lock(cache_->mutex);
    const auto it = cache_->routes.find(key);
    if (it != cache_->routes.end()) return it->second;
  }
  // Computed outside the lock, so that threads asking for different pairs search at once; the
  // first one in keeps its copy (both are the same route).
  std::vector<int> route =
      per_dimension_ ? PerDimensionRoute(src_device, dst_device) : RouteBySearch(src_device, dst_device);
  const std::lock_guard lock(cache_->mutex);
  return cache_->routes.try_emplace(key, std::move(route)).first->second;
}

int64_t Topology::RouteLatencyNs(int src_device, int dst_device) const {
  int64_t total = 0;
  for (int id : Route(src_device, dst_device)) total += links_[id].latency_ns;
  return total;
}

double Topology::RouteBandwidth(int src_device, int dst_device) const {
  double bandwidth = std::numeric_limits<double>::infinity();
  for (int id : Route(src_device, dst_device)) bandwidth = std::min(bandwidth, links_[id].bandwidth_bytes_per_s);
  return bandwidth;
}

}  // namespace stagecraft::sim
