// The ring collectives' closed forms (collectives.h).
#include "stagecraft/sim/collectives.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <unordered_map>

#include "stagecraft/sim/topology.h"

namespace stagecraft::sim {
namespace {

// One ring pass (RingPasses): its steps' latency and its bytes at the link's bandwidth.
double RingPassNs(double bytes, int n, const RingLink& link) {
  const RingPasses pass{1, n};
  return pass.Steps() * static_cast<double>(link.latency_ns) + pass.BusBytes(bytes) / link.bytes_per_s * 1e9;
}

// The group's devices by node (`node_of`; < 0: no node), in ring order, where the hierarchical
// algorithm applies: N >= 2 nodes with the same k >= 2 devices on each; empty otherwise.
template <class NodeOf>
std::map<int, std::vector<int>> EvenNodeGroups(const std::vector<int>& devices, NodeOf node_of) {
  std::map<int, std::vector<int>> by_node;
  for (const int d : devices) {
    const int node = node_of(d);
    if (node < 0) return {};
    by_node[node].push_back(d);
  }
  if (by_node.size() < 2 || by_node.begin()->second.size() < 2) return {};
  for (const auto& [node, local] : by_node) {
    if (local.size() != by_node.begin()->second.size()) return {};
  }
  return by_node;
}

}  // namespace

RingLink RingLinkOf(const TopologySpec& topology, const std::vector<int>& devices) {
  RingLink ring{std::numeric_limits<double>::infinity(), 0};
  if (devices.size() <= 1) return ring;
  if (topology.explicit_graph()) {
    const Topology machine(topology);
    for (size_t i = 0; i < devices.size(); ++i) {
      const int a = devices[i], b = devices[(i + 1) % devices.size()];
      ring.bytes_per_s = std::min(ring.bytes_per_s, machine.RouteBandwidth(a, b));
      ring.latency_ns = std::max(ring.latency_ns, machine.RouteLatencyNs(a, b));
    }
    return ring;
  }
  const bool one_node = std::all_of(devices.begin(), devices.end(),
                                    [&](int d) { return topology.NodeOf(d) == topology.NodeOf(devices.front()); });
  const LinkScope scope = one_node ? LinkScope::kNode : LinkScope::kCluster;
  for (const LinkSpec& link : topology.links) {
    if (link.scope == scope) return {link.bandwidth_bytes_per_s, link.latency_ns};
  }
  return ring;  // validation has made sure the scope the devices use has a link
}

double AllReduceNs(double bytes, int n, const RingLink& link) { return kAllReducePasses * RingPassNs(bytes, n, link); }
double ReduceScatterNs(double bytes, int n, const RingLink& link) { return RingPassNs(bytes, n, link); }
double AllGatherNs(double bytes, int n, const RingLink& link) { return RingPassNs(bytes, n, link); }

double GroupPassNs(const TopologySpec& topology, double bytes, const std::vector<int>& devices) {
  const int n = static_cast<int>(devices.size());
  if (n <= 1 || bytes <= 0) return 0;
  const double ring = RingPassNs(bytes, n, RingLinkOf(topology, devices));
  if (topology.explicit_graph()) return ring;
  const auto by_node = EvenNodeGroups(devices, [&](int d) { return topology.NodeOf(d); });
  if (by_node.empty()) return ring;
  const int nodes = static_cast<int>(by_node.size()), k = static_cast<int>(by_node.begin()->second.size());
  // Across the nodes among the devices of one local index (B / k each), and inside each node.
  std::vector<int> across;
  for (const auto& [node, local] : by_node) across.push_back(local.front());
  const double hierarchical = RingPassNs(bytes / k, nodes, RingLinkOf(topology, across)) +
                              RingPassNs(bytes, k, RingLinkOf(topology, by_node.begin()->second));
  return std::min(ring, hierarchical);
}

}  // namespace stagecraft::sim

namespace stagecraft::sim {
namespace {

int64_t Share(int64_t bytes, int64_t num, int64_t den) {
  return den <= 0 ? 0 : static_cast<int64_t>(static_cast<__int128>(bytes) * num / den);
}

// A ring pass over `devices` moving `bytes` from each to the next, in `steps` steps.
void AddRing(const Topology& topo, const std::vector<int>& devices, int64_t bytes, CollectivePhase* phase) {
  const size_t n = devices.size();
  for (size_t i = 0; i < n && n > 1; ++i) {
    const int a = devices[i], b = devices[(i + 1) % n];
    phase->flows.push_back({a, b, bytes});
    phase->route_latency_ns = std::max(phase->route_latency_ns, topo.RouteLatencyNs(a, b));
  }
}

}  // namespace

std::string_view AlgorithmName(CollectiveAlgorithm algorithm) {
  switch (algorithm) {
    case CollectiveAlgorithm::kRing: return "ring";
    case CollectiveAlgorithm::kTree: return "tree";
    case CollectiveAlgorithm::kHierarchical: return "hierarchical";
    case CollectiveAlgorithm::kAllToAll: return "all_to_all";
    case CollectiveAlgorithm::kMeasured: return "measured";
  }
  return "?";
}

CollectivePlan RingAllReduce(const Topology& topo, const std::vector<int>& devices, int64_t bytes) {
  CollectivePlan plan{CollectiveAlgorithm::kRing, {}};
  const int n = static_cast<int>(devices.size());
  if (n <= 1) return plan;
  CollectivePhase phase;
  phase.steps = kAllReducePasses * (n - 1);  // RingPasses, in whole bytes
  AddRing(topo, devices, Share(bytes, kAllReducePasses * (n - 1), n), &phase);
  plan.phases.push_back(std::move(phase));
  return plan;
}

namespace {

// The chance that none of a token's `top_k` distinct experts, drawn uniformly from `experts`, is
// among `held` of them: C(experts - held, top_k) / C(experts, top_k).
double MissesAll(int experts, double held, int top_k) {
  double p = 1;
  for (int i = 0; i < top_k; ++i) p *= std::max(0.0, (experts - held - i) / (experts - i));
  return p;
}

}  // namespace

CollectivePlan PlanAllToAll(const Topology& topo, const std::vector<int>& devices, int64_t bytes, int count,
                            const AllToAllRouting& routing) {
  CollectivePlan plan{CollectiveAlgorithm::kAllToAll, {}};
  const int n = static_cast<int>(devices.size());
  if (n <= 1 || count <= 0) return plan;
  CollectivePhase phase;
  phase.steps = count;
  const double each = static_cast<double>(bytes) * count / n;  // to one other device, over the count
  const bool dedup = routing.dedup && routing.experts >= n && routing.copies > 0;
  const double one = static_cast<double>(bytes) * count / routing.copies;  // one copy of the tokens
  const double per_device = dedup ? static_cast<double>(routing.experts) / n : 0;
  const auto flow = [&](int src, int dst, double flow_bytes) {
    if (flow_bytes <= 0 || src == dst) return;
    phase.flows.push_back({src, dst, std::llround(flow_bytes)});
    phase.route_latency_ns = std::max(phase.route_latency_ns, topo.RouteLatencyNs(src, dst));
  };
  if (topo.NodeOf(devices.front()) < 0) {  // an explicit graph: every pair
    const double pair = dedup ? one * (1 - MissesAll(routing.experts, per_device, routing.top_k)) : each;
    for (const int src : devices) {
      for (const int dst : devices) flow(src, dst, pair);
    }
  } else {
    std::map<int, std::vector<int>> by_node;  // the group's devices on each node, in group order
    for (const int d : devices) by_node[topo.NodeOf(d)].push_back(d);
    std::vector<const std::vector<int>*> nodes;
    for (const auto& [node, on] : by_node) nodes.push_back(&on);
    for (size_t n_i = 0; n_i < nodes.size(); ++n_i) {
      const std::vector<int>& on = *nodes[n_i];
      const std::vector<int>& next = *nodes[(n_i + 1) % nodes.size()];
      const double k = static_cast<double>(on.size());
      double intra = (k - 1) * each, inter = (n - k) * each;
      if (dedup) {
        // The chance a token has an expert among `held` of the group's: with node-limited routing
        // (M of the N nodes chosen, its top_k among their experts) M/N that it is on a chosen node
        // times the chance among those M nodes' experts; the nodes hold the group alike (Validate).
        const int limit = routing.node_limit, node_count = static_cast<int>(nodes.size());
        const bool limited = limit > 0 && limit < node_count;
        const auto hit = [&](double held) {
          if (!limited) return 1 - MissesAll(routing.experts, held, routing.top_k);
          const int chosen = routing.experts / node_count * limit;
          return static_cast<double>(limit) / node_count * (1 - MissesAll(chosen, held, routing.top_k));
        };
        const double gpus = (k - 1) * hit(per_device);
        intra = one * gpus * static_cast<double>(nodes.size());  // its node's, and its forwarding for each other
        inter = 0;
        for (size_t o = 0; o < nodes.size(); ++o) {
          if (o != n_i) inter += one * hit(per_device * static_cast<double>(nodes[o]->size()));
        }
      }
      for (size_t j = 0; j < on.size(); ++j) {
        flow(on[j], on[(j + 1) % on.size()], intra);
        if (nodes.size() > 1) flow(on[j], next[j % next.size()], inter);
      }
    }
  }
  plan.phases.push_back(std::move(phase));
  return plan;
}

CollectivePlan TreeAllReduce(const Topology& topo, const std::vector<int>& devices, int64_t bytes) {
  CollectivePlan plan{CollectiveAlgorithm::kTree, {}};
  const int n = static_cast<int>(devices.size());
  if (n <= 1) return plan;
  CollectivePhase phase;
  int depth = 0;
  while ((2 << depth) - 1 < n) ++depth;  // a complete binary tree of n nodes has this depth
  phase.steps = 2 * depth;
  for (int i = 1; i < n; ++i) {
    const int child = devices[i], parent = devices[(i - 1) / 2];
    phase.flows.push_back({child, parent, bytes});  // the reduction, up
    phase.flows.push_back({parent, child, bytes});  // the broadcast, down
    phase.route_latency_ns = std::max({phase.route_latency_ns, topo.RouteLatencyNs(child, parent),
                                       topo.RouteLatencyNs(parent, child)});
  }
  plan.phases.push_back(std::move(phase));
  return plan;
}

CollectivePlan HierarchicalAllReduce(const Topology& topo, const std::vector<int>& devices, int64_t bytes) {
  CollectivePlan plan{CollectiveAlgorithm::kHierarchical, {}};
  const auto by_node = EvenNodeGroups(devices, [&](int d) { return topo.NodeOf(d); });
  if (by_node.empty()) return plan;
  const int nodes = static_cast<int>(by_node.size()), k = static_cast<int>(by_node.begin()->second.size());
  CollectivePhase scatter, across, gather;
  scatter.steps = gather.steps = k - 1;
  across.steps = kAllReducePasses * (nodes - 1);
  for (const auto& [node, local] : by_node) {
    AddRing(topo, local, Share(bytes, k - 1, k), &scatter);
    AddRing(topo, local, Share(bytes, k - 1, k), &gather);
  }
  for (int j = 0; j < k; ++j) {
    std::vector<int> ring;
    for (const auto& [node, local] : by_node) ring.push_back(local[j]);
    AddRing(topo, ring, Share(Share(bytes, 1, k), kAllReducePasses * (nodes - 1), nodes), &across);
  }
  plan.phases = {std::move(scatter), std::move(across), std::move(gather)};
  return plan;
}

CollectivePlan MeasuredAllReduce(const CollectiveFit& fit, int n, int64_t bytes) {
  CollectivePlan plan{CollectiveAlgorithm::kMeasured, {}};
  if (n <= 1) return plan;
  CollectivePhase phase;
  const RingLink ring{fit.DataBusBytesPerS(), fit.latency_ns};
  // Capped where int64 ns still hold it: the caller refuses anything past an hour per op.
  phase.measured_ns = std::llround(std::min(AllReduceNs(static_cast<double>(bytes), n, ring), 1e18));
  plan.phases.push_back(std::move(phase));
  return plan;
}

double PlanAloneNs(const Topology& topo, const CollectivePlan& plan, int64_t step_latency_ns) {
  double total = 0;
  for (const CollectivePhase& phase : plan.phases) {
    total += static_cast<double>(phase.measured_ns);
    std::unordered_map<int, double> load;  // link -> bytes the phase moves over it
    for (const CollectiveFlow& f : phase.flows) {
      for (int link : topo.Route(f.src_device, f.dst_device)) load[link] += static_cast<double>(f.bytes);
    }
    double data_ns = 0;
    for (const auto& [link, bytes] : load) {
      data_ns = std::max(data_ns, bytes / topo.links()[link].bandwidth_bytes_per_s * 1e9);
    }
    total += static_cast<double>(phase.steps) * static_cast<double>(phase.route_latency_ns + step_latency_ns) +
             data_ns;
  }
  return total;
}

CollectivePlan PlanAllReduce(const Topology& topo, const std::vector<int>& devices, int64_t bytes,
                             int64_t step_latency_ns) {
  CollectivePlan best = RingAllReduce(topo, devices, bytes);
  double best_ns = PlanAloneNs(topo, best, step_latency_ns);
  for (CollectivePlan other : {TreeAllReduce(topo, devices, bytes), HierarchicalAllReduce(topo, devices, bytes)}) {
    if (other.phases.empty()) continue;
    const double ns = PlanAloneNs(topo, other, step_latency_ns);
    if (ns < best_ns) best = std::move(other), best_ns = ns;
  }
  return best;
}

}  // namespace stagecraft::sim
