// Collectives as closed forms (the ring algorithm, as NCCL runs it within a ring and as
// nccl-tests states its bus bandwidth): over n ranks, an all-reduce of B bytes moves 2(n-1)/n·B
// through each rank's link in 2(n-1) steps; a reduce-scatter or an all-gather moves (n-1)/n·B in
// n-1 steps. A step pays the link's latency; the bytes go at the slowest link of the ring. The
// group's ring is bound by the link its devices share: per-dimension topologies, the node's when
// they all sit on one node, else the cluster's; an explicit graph, the slowest route between
// neighbours of the ring. (The hierarchical and tree forms, and collectives as flows sharing
// links with the pipeline's transfers, are not modelled yet.)
#pragma once

#include <cstdint>
#include <vector>

#include "stagecraft/sim/topology_spec.h"

namespace stagecraft::sim {

struct RingLink {
  double bytes_per_s = 0;  // +inf when the group is one device
  int64_t latency_ns = 0;
};

// The link that bounds a ring over `devices` (topology device ids, in ring order).
RingLink RingLinkOf(const TopologySpec& topology, const std::vector<int>& devices);

// Times in ns (not rounded); 0 for a group of one.
double AllReduceNs(double bytes, int n, const RingLink& link);
double ReduceScatterNs(double bytes, int n, const RingLink& link);
double AllGatherNs(double bytes, int n, const RingLink& link);

}  // namespace stagecraft::sim
