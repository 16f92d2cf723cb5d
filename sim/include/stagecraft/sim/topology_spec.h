// The machine a scenario runs on as plain data (DESIGN.md §3 `topology:`): its device and its
// links, per dimension or as an explicit graph. sim::Topology (topology.h) builds the routes.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "stagecraft/sim/enum_names.h"

namespace stagecraft::sim {

struct DeviceSpec {
  std::string name;
  double peak_flops = 0;     // FLOP/s at the model's dtype ("989TFLOPS")
  int64_t memory_bytes = 0;  // device memory ("80GiB")
  double efficiency = 1.0;   // achieved fraction of peak, in (0, 1]
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

// Either per-dimension (nodes x devices_per_node + `links` by scope) or an explicit graph
// (`vertices` non-empty; devices are the device vertices in the order listed).
struct TopologySpec {
  DeviceSpec device;
  int nodes = 1;
  int devices_per_node = 1;
  std::vector<LinkSpec> links;
  std::vector<VertexSpec> vertices;
  std::vector<GraphLinkSpec> graph_links;

  bool explicit_graph() const { return !vertices.empty(); }
  int devices() const;  // nodes * devices_per_node, or the number of device vertices
};

}  // namespace stagecraft::sim
