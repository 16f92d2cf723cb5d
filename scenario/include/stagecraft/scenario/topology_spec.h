// The machine a scenario runs on as plain data (DESIGN.md §3 `topology:`, §10 `topology.groups`,
// `topology.host`): its devices (one kind, or one per node group), its hosts and its links, per
// dimension or as an explicit graph. sim::Topology (sim/topology.h) builds the routes.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "stagecraft/scenario/enum_names.h"

namespace stagecraft::sim {

// The precisions a device may state a peak for (scenario.h Dtype).
inline constexpr int kDtypeCount = 5;

// How fast a device runs a GEMM of a given shape (the roofline cost model, sim/roofline.h): a
// GEMM's output is cut into tiles, one per thread block; the device runs `sms` of them at a
// time (a wave), each tile's main loop over k costing k + k_overhead steps (its prologue and
// epilogue amortised over k). `max_efficiency` is the fraction of the dtype's peak a full wave
// of a long-k tile reaches. The library picks the tile that finishes first (cuBLAS's heuristics
// choose among such tiles).
struct GemmModel {
  double max_efficiency = 0;  // 0: no GEMM model stated
  int sms = 0;                // streaming multiprocessors (tiles in flight per wave)
  std::vector<std::pair<int, int>> tiles;  // the output tiles, m x n, the library chooses among
  double k_overhead = 0;      // per tile, in steps of k
  // Batched GEMMs (attention's scores and context): the same model, each matrix its own tiles;
  // their smaller tiles and strided operands reach this fraction of max_efficiency.
  double batched_efficiency = 1;
  // Block-scaled FP8 GEMMs' own max_efficiency and k_overhead (`gemm.fp8_blockwise`, for
  // training.fp8_scaling blockwise; 0 and -1: the 16-bit ones), at the FP8 peak: their kernels
  // promote the partial sums every 128 k steps, and a tile's fixed time is more k steps at twice
  // the rate. Per-tensor-scaled FP8 GEMMs take the 16-bit constants.
  double blockwise_max_efficiency = 0;
  double blockwise_k_overhead = -1;

  bool stated() const { return max_efficiency > 0; }
  double MaxEfficiency(bool blockwise_fp8) const {
    return blockwise_fp8 && blockwise_max_efficiency > 0 ? blockwise_max_efficiency : max_efficiency;
  }
  double KOverhead(bool blockwise_fp8) const {
    return blockwise_fp8 && blockwise_k_overhead >= 0 ? blockwise_k_overhead : k_overhead;
  }
};

struct DeviceSpec {
  std::string name;
  double peak_flops = 0;     // FLOP/s at the model's dtype ("989TFLOPS")
  int64_t memory_bytes = 0;  // device memory ("80GiB")
  double efficiency = 1.0;   // achieved fraction of peak, in (0, 1] (the flat FLOPs models)
  // Dense peak by dtype (index: Dtype of scenario.h: fp32, tf32, bf16, fp16, fp8; 0 = not stated);
  // `peak_flops` is the entry of the scenario's precision. A scalar `peak` states it alone.
  double peak_by_dtype[kDtypeCount] = {0, 0, 0, 0, 0};
  // The roofline model's facts (0: not stated; a device without memory_bandwidth and gemm is
  // costed by the flat FLOPs models).
  double memory_bandwidth = 0;      // bytes/s, the memory's peak
  double memory_efficiency = 1;     // fraction of it a streaming kernel reaches
  int64_t launch_overhead_ns = 0;   // added per kernel
  // How the device splits itself between pipeline ranks that share it (ranks_per_device > 1):
  // 0, processor sharing (every running op at 1 / n of its speed); else turns of this length,
  // round robin, the op holding the device running at full speed (an operating system's time
  // slice for a CPU core: `time_slice: 3ms`).
  int64_t time_slice_ns = 0;
  // Whether copies between device and host memory run beside the compute (a GPU's copy engines),
  // or on the device's own compute, holding it (`copy_engine: false`: a CPU core's memcpy).
  bool copy_engine = true;
  GemmModel gemm;
  // Memory-bound kernels that move their bytes at another rate than a streaming kernel's, by the
  // kernel list's name (sim/gpt_kernels.h): each one's rate as a fraction of memory_efficiency's
  // (`memory_kernels: {softmax: 0.5}`); a kernel not named moves at memory_efficiency's rate.
  std::vector<std::pair<std::string, double>> memory_kernel_rates;
  std::string source;  // the library file it was read from, as found ("" when inline)

  bool roofline() const { return memory_bandwidth > 0 && gemm.stated(); }
  // The rate of memory-bound kernel `name` relative to a streaming kernel's (1 unless stated; a
  // recomputed kernel, "recompute.NAME", as NAME).
  double MemoryKernelRate(std::string_view name) const {
    constexpr std::string_view kRecomputed = "recompute.";  // GptRecomputeKernels' prefix
    if (name.starts_with(kRecomputed)) name.remove_prefix(kRecomputed.size());
    for (const auto& [kernel, rate] : memory_kernel_rates) {
      if (kernel == name) return rate;
    }
    return 1.0;
  }
  // A device for the flat FLOPs models: its peak at the run's dtype and its efficiency.
  static DeviceSpec Flat(std::string name, double peak_flops, int64_t memory_bytes, double efficiency) {
    DeviceSpec d;
    d.name = std::move(name), d.peak_flops = peak_flops, d.memory_bytes = memory_bytes, d.efficiency = efficiency;
    return d;
  }
};

// Which switch a per-dimension link goes to: its node's ("node") or the cluster's ("cluster").
enum class LinkScope { kNode, kCluster };
inline constexpr EnumName<LinkScope> kLinkScopeNames[] = {{LinkScope::kNode, "node"}, {LinkScope::kCluster, "cluster"}};
constexpr std::string_view Name(LinkScope scope) { return NameIn(kLinkScopeNames, scope); }

// One dimension of a per-dimension topology: a device's link to its scope's switch.
// `latency_ns` is device to device through that switch (DESIGN §3).
struct LinkSpec {
  LinkScope scope = LinkScope::kNode;
  double bandwidth_bytes_per_s = 0;
  int64_t latency_ns = 0;
};

// Explicit graph form: named vertices and full-duplex links between them.
enum class VertexKind { kDevice, kSwitch };
inline constexpr EnumName<VertexKind> kVertexKindNames[] = {{VertexKind::kDevice, "device"},
                                                            {VertexKind::kSwitch, "switch"}};
constexpr std::string_view Name(VertexKind kind) { return NameIn(kVertexKindNames, kind); }

struct VertexSpec {
  std::string name;
  VertexKind kind = VertexKind::kDevice;
};
struct GraphLinkSpec {
  std::string a, b;  // vertex names
  double bandwidth_bytes_per_s = 0;
  int64_t latency_ns = 0;  // one traversal of this link
};

// A group of nodes alike (topology.groups): `nodes` nodes of `devices_per_node` devices, each
// device a `device`. Groups are numbered in the order listed, their devices after the previous
// group's (group 0's devices first).
struct NodeGroupSpec {
  int nodes = 1;
  int devices_per_node = 1;
  DeviceSpec device;
};

// The host of each node (topology.host): its memory (DRAM) and the link between it and each of
// the node's devices (PCIe, or a chip-to-chip link), which the node's devices share. Not stated:
// memory 0 (offloading to the host then has nowhere to go).
struct HostSpec {
  int64_t memory_bytes = 0;         // per node
  double bandwidth_bytes_per_s = 0; // the node's host link, each direction
  int64_t latency_ns = 0;
  // Its DRAM's bandwidth, which an optimizer step on the host streams through
  // (pipeline.offload.optimizer: host); 0: not stated.
  double memory_bandwidth_bytes_per_s = 0;
  // Each device's own link to the host (a GPU's PCIe x16, a CPU core's memcpy), each direction, a
  // ceiling below the node's shared `bandwidth`; 0: not stated (the node's link alone).
  double device_bandwidth_bytes_per_s = 0;
  bool stated() const { return memory_bytes > 0; }
  // The rate of one device's copy when `sharing` devices of its node copy at once: its share of the
  // node's link, at most its own port's.
  double DeviceRate(int sharing = 1) const {
    const double share = bandwidth_bytes_per_s / (sharing > 1 ? sharing : 1);
    return device_bandwidth_bytes_per_s > 0 && device_bandwidth_bytes_per_s < share ? device_bandwidth_bytes_per_s : share;
  }
  // One copy of `bytes` at that rate, its latency first.
  double CopyNs(int64_t bytes, int sharing = 1) const {
    return static_cast<double>(latency_ns) + static_cast<double>(bytes) * 1e9 / DeviceRate(sharing);
  }
};

// Either per-dimension (nodes x devices_per_node + `links` by scope) or an explicit graph
// (`vertices` non-empty; devices are the device vertices in the order listed). Per-dimension,
// one device for all (`device`, `nodes`, `devices_per_node`) or node groups, each its own
// (`groups`, non-empty; then `device` is unnamed and `nodes` / `devices_per_node` unused): read
// a topology's devices through DeviceAt, NodeOf and the counts below, which serve both.
struct TopologySpec {
  DeviceSpec device;
  int nodes = 1;
  int devices_per_node = 1;
  std::vector<NodeGroupSpec> groups;
  HostSpec host;
  std::vector<LinkSpec> links;
  std::vector<VertexSpec> vertices;
  std::vector<GraphLinkSpec> graph_links;

  bool explicit_graph() const { return !vertices.empty(); }
  bool grouped() const { return !groups.empty(); }
  // nodes * devices_per_node (over the groups), or the number of device vertices.
  int devices() const {
    if (explicit_graph()) {
      int count = 0;
      for (const VertexSpec& v : vertices) count += v.kind == VertexKind::kDevice ? 1 : 0;
      return count;
    }
    if (!grouped()) return nodes * devices_per_node;
    int count = 0;
    for (const NodeGroupSpec& g : groups) count += g.nodes * g.devices_per_node;
    return count;
  }
  // Per-dimension: the nodes over the groups.
  int node_count() const {
    if (!grouped()) return nodes;
    int count = 0;
    for (const NodeGroupSpec& g : groups) count += g.nodes;
    return count;
  }
  // The device kinds: one, or one per group.
  int group_count() const { return grouped() ? static_cast<int>(groups.size()) : 1; }
  const DeviceSpec& GroupDevice(int group) const { return grouped() ? groups[static_cast<size_t>(group)].device : device; }
  // The group device `d` (numbered as devices() counts them) belongs to; 0 without groups.
  int GroupOf(int d) const {
    if (!grouped()) return 0;
    for (size_t g = 0; g < groups.size(); ++g) {
      const int size = groups[g].nodes * groups[g].devices_per_node;
      if (d < size) return static_cast<int>(g);
      d -= size;
    }
    return static_cast<int>(groups.size()) - 1;  // past the end: the caller checked the range
  }
  const DeviceSpec& DeviceAt(int d) const { return GroupDevice(GroupOf(d)); }
  // Whether an optimizer step can run on the host (pipeline.offload.optimizer: host): its DRAM's
  // bandwidth is stated, or every device is a CPU (copy_engine: false), its own host.
  bool HostRunsTheStep() const {
    if (host.memory_bandwidth_bytes_per_s > 0) return true;
    for (int d = 0; d < devices(); ++d) {
      if (DeviceAt(d).copy_engine) return false;
    }
    return true;
  }
  // Per-dimension: the node of device `d` (nodes numbered as the devices are).
  int NodeOf(int d) const {
    if (!grouped()) return d / devices_per_node;
    int node = 0;
    for (const NodeGroupSpec& g : groups) {
      const int size = g.nodes * g.devices_per_node;
      if (d < size) return node + d / g.devices_per_node;
      d -= size, node += g.nodes;
    }
    return node;  // past the last device: one past the last node, as without groups
  }
  // Per-dimension: how many devices node `n` holds.
  int DevicesOnNode(int n) const {
    if (!grouped()) return devices_per_node;
    for (const NodeGroupSpec& g : groups) {
      if (n < g.nodes) return g.devices_per_node;
      n -= g.nodes;
    }
    return 0;
  }
  // Whether every device states the roofline model's facts (DeviceSpec::roofline).
  bool roofline() const {
    for (int g = 0; g < group_count(); ++g) {
      if (!GroupDevice(g).roofline()) return false;
    }
    return true;
  }
};

}  // namespace stagecraft::sim
