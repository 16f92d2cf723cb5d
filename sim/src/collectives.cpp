// The ring collectives' closed forms (collectives.h).
#include "stagecraft/sim/collectives.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "stagecraft/sim/topology.h"

namespace stagecraft::sim {
namespace {

// (n - 1) steps of `bytes` / n each.
double RingPassNs(double bytes, int n, const RingLink& link) {
  if (n <= 1) return 0;
  const double steps = n - 1;
  return steps * static_cast<double>(link.latency_ns) + steps / n * bytes / link.bytes_per_s * 1e9;
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
  const int per_node = std::max(topology.devices_per_node, 1);
  const bool one_node = std::all_of(devices.begin(), devices.end(),
                                    [&](int d) { return d / per_node == devices.front() / per_node; });
  const LinkScope scope = one_node ? LinkScope::kNode : LinkScope::kCluster;
  for (const LinkSpec& link : topology.links) {
    if (link.scope == scope) return {link.bandwidth_bytes_per_s, link.latency_ns};
  }
  return ring;  // validation has made sure the scope the devices use has a link
}

double AllReduceNs(double bytes, int n, const RingLink& link) { return 2 * RingPassNs(bytes, n, link); }
double ReduceScatterNs(double bytes, int n, const RingLink& link) { return RingPassNs(bytes, n, link); }
double AllGatherNs(double bytes, int n, const RingLink& link) { return RingPassNs(bytes, n, link); }

}  // namespace stagecraft::sim
