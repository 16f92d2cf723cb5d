// Collectives as closed forms (the ring algorithm, as NCCL runs it within a ring and as
// nccl-tests states its bus bandwidth): over n ranks, an all-reduce of B bytes moves 2(n-1)/n·B
// through each rank's link in 2(n-1) steps; a reduce-scatter or an all-gather moves (n-1)/n·B in
// n-1 steps. A step pays the link's latency; the bytes go at the slowest link of the ring. The
// group's ring is bound by the link its devices share: per-dimension topologies, the node's when
// they all sit on one node, else the cluster's; an explicit graph, the slowest route between
// neighbours of the ring. These closed forms time the tensor group's per-layer collectives
// inside an op; the data-parallel REDUCE_GRAD runs as a CollectivePlan, below.
//
// CollectivePlan: an all-reduce as flows over the topology's links, so that the engine can
// move them through the same links as the pipeline's transfers (transfers.h). Three
// algorithms, as NCCL has them:
//   ring         one phase: each device sends 2(n-1)/n·B to the next in the ring; 2(n-1) steps.
//   tree         one phase: a binary tree over the ring order, every edge carrying B up (the
//                reduction) and B down (the broadcast) pipelined; 2·depth steps.
//   hierarchical (a per-dimension topology, the group on several nodes with the same k >= 2
//                devices on each) a reduce-scatter inside each node ((k-1)/k·B per device),
//                an all-reduce across the nodes among the devices of the same local index
//                (2(N-1)/N·B/k each), an all-gather inside each node ((k-1)/k·B).
//   measured     (a measured fit, CostTable::allreduce) one phase of no flows that takes the
//                fit's time: AllReduceNs with the fit's latency and bus bandwidth, as a measured
//                ping-pong times a transfer (on links of its own, shared with nothing).
// A step pays the slowest route latency of its phase. The plan is the algorithm whose time
// alone (no other traffic) is least; ZeRO-1's reduce-scatter of the gradients plus all-gather of
// the weights moves the same bytes in the same steps as the ring all-reduce, and is planned as
// one.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string_view>
#include <vector>

#include "stagecraft/sim/cost_table.h"
#include "stagecraft/scenario/topology_spec.h"

namespace stagecraft::sim {

class Topology;

enum class CollectiveAlgorithm : uint8_t { kRing, kTree, kHierarchical, kMeasured, kAllToAll };
// "ring", "tree", "hierarchical", "measured", "all_to_all"
std::string_view AlgorithmName(CollectiveAlgorithm algorithm);

struct CollectiveFlow {
  int src_device = 0, dst_device = 0;
  int64_t bytes = 0;
};

struct CollectivePhase {
  int steps = 0;                // latency-bound steps (each pays route_latency_ns)
  int64_t route_latency_ns = 0; // the slowest route among the phase's flows
  int64_t measured_ns = 0;      // a measured phase's whole time (no steps, no flows); 0 otherwise
  std::vector<CollectiveFlow> flows;
};

struct CollectivePlan {
  CollectiveAlgorithm algorithm = CollectiveAlgorithm::kRing;
  std::vector<CollectivePhase> phases;  // run one after the other; empty for a group of one
};

// The all-reduce of `bytes` over `devices` (topology device ids, in ring order), planned as the
// fastest alone of the algorithms that apply. `step_latency_ns` is added to every step (the
// cost table's p2p latency).
CollectivePlan PlanAllReduce(const Topology& topology, const std::vector<int>& devices, int64_t bytes,
                             int64_t step_latency_ns = 0);
CollectivePlan RingAllReduce(const Topology& topology, const std::vector<int>& devices, int64_t bytes);
CollectivePlan TreeAllReduce(const Topology& topology, const std::vector<int>& devices, int64_t bytes);
// Empty (no phases) when the group does not sit on several nodes with k >= 2 devices each.
CollectivePlan HierarchicalAllReduce(const Topology& topology, const std::vector<int>& devices, int64_t bytes);
// The all-reduce of `bytes` over n ranks as `fit` times it; empty (no phases) for n <= 1.
CollectivePlan MeasuredAllReduce(const CollectiveFit& fit, int n, int64_t bytes);

// `count` all-to-alls one after the other over `devices` (an expert group, topology device ids),
// each device holding `bytes` of which 1/n stays and 1/n goes to each other device: one phase of
// `count` steps (each an all-to-all's latency, its slowest route) whose flows load every link as
// the n(n - 1) pairs would. On the per-dimension form each device sends two flows, what its
// node's other group devices take to the next of them on its node ((k - 1)/n of `bytes` x count,
// k of the group on that node) and what the other nodes' take through its cluster link to the
// device of its local index on the next node ((n - k)/n), so every device's links carry and
// receive exactly their share; on an explicit graph, a flow per pair. Empty for n <= 1.
// With `routing.dedup` (DeepEP) a token goes once to each other node holding any of its top_k
// experts (1 - C(X - x, k) / C(X, k) of a copy per node, x the node's experts) and once to each
// GPU holding one inside a node: a device sends (k_n - 1)(1 - C(X - x_d, k) / C(X, k)) copies to
// its node's GPUs and forwards as many for each other node, x_d its own experts.
CollectivePlan PlanAllToAll(const Topology& topology, const std::vector<int>& devices, int64_t bytes, int count,
                            const AllToAllRouting& routing = {});

// The plan's time alone in ns: per phase, its measured time, its steps' latency (+
// `step_latency_ns` each) and the most loaded link's bytes (the flows of the phase that cross
// it, summed) over its bandwidth.
double PlanAloneNs(const Topology& topology, const CollectivePlan& plan, int64_t step_latency_ns = 0);

struct RingLink {
  double bytes_per_s = 0;  // +inf when the group is one device
  int64_t latency_ns = 0;
};

// The link that bounds a ring over `devices` (topology device ids, in ring order).
RingLink RingLinkOf(const TopologySpec& topology, const std::vector<int>& devices);

// The ring collectives, stated once: a ring pass over n ranks is n - 1 latency-bound steps, each
// moving 1/n of the buffer through every rank's link; a reduce-scatter or an all-gather is one
// pass, an all-reduce two. The times below and the plans are built from it, and calibration
// inverts it (harness::FitAllReduce, InPipelineBusBandwidth).
inline constexpr int kAllReducePasses = 2;
struct RingPasses {
  int passes = kAllReducePasses;
  int n = 1;  // ranks in the ring
  // The latency-bound steps: passes x (n - 1).
  double Steps() const { return n > 1 ? passes * (n - 1.0) : 0; }
  // What crosses each rank's link for a buffer of `bytes`: passes x (n - 1) / n x bytes.
  double BusBytes(double bytes) const { return n > 1 ? passes * ((n - 1.0) / n * bytes) : 0; }
};

// Times in ns (not rounded); 0 for a group of one.
double AllReduceNs(double bytes, int n, const RingLink& link);
double ReduceScatterNs(double bytes, int n, const RingLink& link);
double AllGatherNs(double bytes, int n, const RingLink& link);
// What a context group's ring of key-value exchanges taking `ring_ns` alone leaves beside the
// attention of `attention_ns` it runs with: each of its C - 1 steps beside 1/C of that attention.
inline double ContextRingLeftNs(double ring_ns, double attention_ns, int c) {
  return std::max(0.0, ring_ns - attention_ns * (c - 1) / c);
}
// One pass (an all-gather or a reduce-scatter) of a `bytes` buffer over `devices` (topology device
// ids, in ring order), by the cheaper of the ring over RingLinkOf and, on a per-dimension topology
// with the group on N >= 2 nodes with the same k >= 2 devices on each, the hierarchical pass
// (CollectiveAlgorithm::kHierarchical's halves: a pass of B / k across the nodes among the devices
// of the same local index, one of B inside each node). ZeRO-2's and ZeRO-3's per-layer collectives.
double GroupPassNs(const TopologySpec& topology, double bytes, const std::vector<int>& devices);

}  // namespace stagecraft::sim
