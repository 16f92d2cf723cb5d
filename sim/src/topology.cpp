// Topology graph: builds devices, switches and directed links from a TopologySpec and finds
// lowest-latency routes with Boost.Graph's Dijkstra, cached per source device.
#include "stagecraft/sim/topology.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <mutex>
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

// Records, for each vertex, the directed link by which Dijkstra last improved it.
class PredecessorRecorder : public boost::default_dijkstra_visitor {
 public:
  explicit PredecessorRecorder(std::vector<int>* pred_link) : pred_link_(pred_link) {}
  template <class Edge, class G>
  void edge_relaxed(Edge e, const G& g) {
    (*pred_link_)[boost::target(e, g)] = g[e].link;
  }

 private:
  std::vector<int>* pred_link_;
};

}  // namespace

struct Topology::RouteCache {
  Graph graph;
  std::vector<std::once_flag> once;                   // per source device
  std::vector<std::vector<std::vector<int>>> routes;  // [src][dst] -> link ids
};

int TopologySpec::devices() const {
  if (!explicit_graph()) return nodes * devices_per_node;
  int count = 0;
  for (const VertexSpec& v : vertices) count += v.kind == VertexKind::kDevice ? 1 : 0;
  return count;
}

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
    if (forward_latency_ns < 0 || backward_latency_ns < 0) {
      throw InputError(fmt::format("link {} - {}: latency must be >= 0", names[a], names[b]));
    }
    links.push_back({bandwidth, forward_latency_ns, a, b});
    links.push_back({bandwidth, backward_latency_ns, b, a});
  }
};

const LinkSpec* FindScope(const TopologySpec& spec, std::string_view scope) {
  for (const LinkSpec& link : spec.links) {
    if (link.scope == scope) return &link;
  }
  return nullptr;
}

void BuildPerDimension(const TopologySpec& spec, Builder* b, std::vector<int>* device_vertices) {
  if (spec.nodes < 1 || spec.devices_per_node < 1) {
    throw InputError(fmt::format("topology needs nodes >= 1 and devices_per_node >= 1, got {} and {}", spec.nodes,
                                 spec.devices_per_node));
  }
  const LinkSpec* node = FindScope(spec, "node");
  const LinkSpec* cluster = FindScope(spec, "cluster");
  if (spec.nodes > 1 && cluster == nullptr) {
    throw InputError(fmt::format("topology has {} nodes but no link with scope 'cluster'", spec.nodes));
  }
  if (spec.nodes == 1 && spec.devices_per_node > 1 && node == nullptr) {
    throw InputError(
        fmt::format("topology has {} devices on its node but no link with scope 'node'", spec.devices_per_node));
  }
  const int devices = spec.nodes * spec.devices_per_node;
  for (int d = 0; d < devices; ++d) {
    device_vertices->push_back(b->AddVertex(fmt::format("node{}/device{}", d / spec.devices_per_node, d)));
  }
  if (node != nullptr) {
    std::vector<int> switches;
    for (int n = 0; n < spec.nodes; ++n) switches.push_back(b->AddVertex(fmt::format("node{}/switch", n)));
    const int64_t up = (node->latency_ns + 1) / 2;
    for (int d = 0; d < devices; ++d) {
      b->AddLink(d, switches[d / spec.devices_per_node], node->bandwidth_bytes_per_s, up, node->latency_ns - up);
    }
  }
  if (spec.nodes > 1) {
    const int cluster_switch = b->AddVertex("cluster/switch");
    const int64_t up = (cluster->latency_ns + 1) / 2;
    for (int d = 0; d < devices; ++d) {
      b->AddLink(d, cluster_switch, cluster->bandwidth_bytes_per_s, up, cluster->latency_ns - up);
    }
  }
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

Topology::Topology(const TopologySpec& spec) {
  Builder b;
  if (spec.explicit_graph()) {
    BuildExplicit(spec, &b, &device_vertices_);
  } else {
    BuildPerDimension(spec, &b, &device_vertices_);
  }
  if (device_vertices_.empty()) throw InputError("topology has no devices");
  devices_ = static_cast<int>(device_vertices_.size());
  vertex_names_ = std::move(b.names);
  links_ = std::move(b.links);

  cache_ = std::make_unique<RouteCache>();
  cache_->graph = Graph(vertex_names_.size());
  for (size_t id = 0; id < links_.size(); ++id) {
    const Link& link = links_[id];
    EdgeProps props{static_cast<int>(id), {link.latency_ns, 1.0 / link.bandwidth_bytes_per_s}};
    boost::add_edge(link.from, link.to, props, cache_->graph);
  }
  cache_->once = std::vector<std::once_flag>(devices_);
  cache_->routes.resize(devices_);

  // Links are full duplex, so every device reaching device 0 means all pairs are connected.
  ComputeRoutesFrom(0);
  for (int d = 1; d < devices_; ++d) {
    if (cache_->routes[0][d].empty()) {
      throw InputError(fmt::format("device {} ({}) cannot reach device 0 ({})", d, vertex_names_[device_vertices_[d]],
                                   vertex_names_[device_vertices_[0]]));
    }
  }
}

Topology::~Topology() = default;
Topology::Topology(Topology&&) noexcept = default;
Topology& Topology::operator=(Topology&&) noexcept = default;

void Topology::ComputeRoutesFrom(int src_device) const {
  std::call_once(cache_->once[src_device], [&] {
    const Graph& g = cache_->graph;
    const size_t n = boost::num_vertices(g);
    const int source = device_vertices_[src_device];
    std::vector<Distance> distance(n);
    std::vector<int> pred_link(n, -1);
    const Distance infinity{std::numeric_limits<int64_t>::max(), std::numeric_limits<double>::infinity()};
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
            .visitor(PredecessorRecorder(&pred_link)));
    std::vector<std::vector<int>>& routes = cache_->routes[src_device];
    routes.assign(devices_, {});
    for (int dst = 0; dst < devices_; ++dst) {
      std::vector<int>& route = routes[dst];
      for (int v = device_vertices_[dst]; v != source && pred_link[v] >= 0; v = links_[pred_link[v]].from) {
        route.push_back(pred_link[v]);
      }
      std::reverse(route.begin(), route.end());
    }
  });
}

const std::vector<int>& Topology::Route(int src_device, int dst_device) const {
  SC_CHECK(src_device >= 0 && src_device < devices_ && dst_device >= 0 && dst_device < devices_,
           fmt::format("route {} -> {} outside {} devices", src_device, dst_device, devices_));
  ComputeRoutesFrom(src_device);
  return cache_->routes[src_device][dst_device];
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
