// The `topology:` and `model:` blocks of a scenario (DESIGN.md §3), checked value by value.
#include <fmt/format.h>

#include <set>
#include <string>

#include "scenario_parse.h"
#include "stagecraft/sim/limits.h"

namespace stagecraft::sim::detail {
namespace {

using yaml::Map;
using yaml::Value;

DeviceSpec ParseDevice(const Value& value) {
  const Map m(value, {"name", "peak", "memory", "efficiency"});
  DeviceSpec device;
  device.name = m.Get("name").String();
  device.peak_flops = m.Get("peak").Flops();
  device.memory_bytes = m.Get("memory").Bytes(1);
  if (const auto e = m.Find("efficiency")) device.efficiency = e->DoubleIn(kMinEfficiency, 1.0);
  return device;
}

std::vector<LinkSpec> ParseScopeLinks(const Value& value) {
  std::vector<LinkSpec> links;
  for (const Value& element : value.Elements()) {
    const Map m(element, {"scope", "bandwidth", "latency"});
    LinkSpec link;
    link.scope = m.Get("scope").Choice({"node", "cluster"});
    for (const LinkSpec& earlier : links) {
      if (earlier.scope == link.scope) m.Get("scope").Fail(fmt::format("a second link with scope '{}'", link.scope));
    }
    link.bandwidth_bytes_per_s = m.Get("bandwidth").Bandwidth();
    link.latency_ns = m.Get("latency").DurationNs();
    links.push_back(link);
  }
  return links;
}

void ParseGraph(const Map& m, TopologySpec* spec) {
  std::set<std::string> names;
  const auto at_most = [](const Value& list, size_t max, std::string_view what) {
    if (list.IsSequence() && list.node().size() > max) {
      list.Fail(fmt::format("expected at most {} {} (a route search visits the whole graph), got {}", max, what,
                            list.node().size()));
    }
  };
  at_most(m.Get("vertices"), kMaxGraphVertices, "vertices");
  at_most(m.Get("links"), kMaxGraphLinks, "links");
  for (const Value& element : m.Get("vertices").Elements()) {
    const Map v(element, {"name", "kind"});
    VertexSpec vertex;
    vertex.name = v.Get("name").String();
    if (!names.insert(vertex.name).second) v.Get("name").Fail(fmt::format("vertex '{}' is listed twice", vertex.name));
    if (const auto kind = v.Find("kind")) {
      vertex.kind = kind->Choice({"device", "switch"}) == "device" ? VertexKind::kDevice : VertexKind::kSwitch;
    }
    spec->vertices.push_back(vertex);
  }
  if (spec->devices() == 0) m.Get("vertices").Fail("expected at least one vertex with kind: device");
  for (const Value& element : m.Get("links").Elements()) {
    const Map l(element, {"a", "b", "bandwidth", "latency"});
    GraphLinkSpec link;
    for (const char* end : {"a", "b"}) {
      const Value name = l.Get(end);
      if (names.count(name.String()) == 0) {
        name.Fail(fmt::format("unknown vertex '{}' (vertices: {})", name.String(), fmt::join(names, ", ")));
      }
    }
    link.a = l.Get("a").String();
    link.b = l.Get("b").String();
    if (link.a == link.b) l.Get("b").Fail(fmt::format("a link from '{}' to itself", link.a));
    link.bandwidth_bytes_per_s = l.Get("bandwidth").Bandwidth();
    link.latency_ns = l.Get("latency").DurationNs();
    spec->graph_links.push_back(link);
  }
}

TransformerSpec ParseTransformer(const Value& value) {
  const Map m(value, {"layers", "hidden", "heads", "seq", "vocab", "dtype"});
  TransformerSpec t;
  t.layers = static_cast<int>(m.Get("layers").Int(1, kMaxLayers));
  t.hidden = static_cast<int>(m.Get("hidden").Int(1, kMaxHidden));
  t.heads = static_cast<int>(m.Get("heads").Int(1, kMaxHeads));
  t.seq = static_cast<int>(m.Get("seq").Int(1, kMaxSeq));
  t.vocab = static_cast<int>(m.Get("vocab").Int(1, kMaxVocab));
  if (const auto dtype = m.Find("dtype")) t.dtype = dtype->Choice({"bf16", "fp16", "fp32"});
  if (t.hidden % t.heads != 0) {
    m.Get("heads").Fail(fmt::format("expected heads to divide hidden ({}), got {}", t.hidden, t.heads));
  }
  return t;
}

MlpSpec ParseMlp(const Value& value) {
  const Map m(value, {"layers", "hidden", "residual", "activation", "loss"});
  MlpSpec mlp;
  mlp.layers = static_cast<int>(m.Get("layers").Int(1, kMaxLayers));
  mlp.hidden = static_cast<int>(m.Get("hidden").Int(1, kMaxHidden));
  if (const auto residual = m.Find("residual")) mlp.residual = residual->Bool();
  if (const auto activation = m.Find("activation")) mlp.activation = activation->Choice({"gelu", "relu"});
  if (const auto loss = m.Find("loss")) mlp.loss = loss->Choice({"mse", "cross_entropy"});
  return mlp;
}

// A scalar for every rank, or a list with exactly one entry per rank.
template <class Read>
std::vector<int64_t> PerRank(const Value& value, int ranks, Read read) {
  if (!value.IsSequence()) return std::vector<int64_t>(ranks, read(value));
  if (static_cast<int>(value.node().size()) != ranks) {
    value.Fail(fmt::format("expected {} entries (one per rank), got {}", ranks, value.node().size()));
  }
  std::vector<int64_t> values;
  for (const Value& element : value.Elements()) values.push_back(read(element));
  return values;
}

ExplicitCosts ParseCosts(const Value& value, int ranks) {
  const Map m(value, {"forward", "backward_input", "backward_weight", "activation_bytes", "weight_bytes", "p2p_latency",
                      "send_bytes"});
  const auto duration = [](const Value& v) { return v.DurationNs(); };
  const auto bytes = [](const Value& v) { return v.Bytes(); };
  ExplicitCosts c;
  c.forward_ns = PerRank(m.Get("forward"), ranks, duration);
  c.backward_input_ns = PerRank(m.Get("backward_input"), ranks, duration);
  c.backward_weight_ns = PerRank(m.Get("backward_weight"), ranks, duration);
  const auto optional_bytes = [&](std::string_view key) {
    const auto found = m.Find(key);
    return found ? PerRank(*found, ranks, bytes) : std::vector<int64_t>(ranks, 0);
  };
  c.activation_bytes = optional_bytes("activation_bytes");
  c.weight_bytes = optional_bytes("weight_bytes");
  if (const auto p2p = m.Find("p2p_latency")) c.p2p_latency_ns = p2p->DurationNs();
  if (const auto send = m.Find("send_bytes")) c.send_bytes = send->Bytes();
  return c;
}

}  // namespace

TopologySpec ParseTopology(const Value& value) {
  const Map m(value, {"device", "nodes", "devices_per_node", "links", "vertices"});
  TopologySpec spec;
  spec.device = ParseDevice(m.Get("device"));
  if (m.Has("vertices")) {
    for (const char* key : {"nodes", "devices_per_node"}) {
      if (const auto found = m.Find(key)) {
        found->Fail("not used with an explicit graph (the devices are the vertices with kind: device)");
      }
    }
    ParseGraph(m, &spec);
    return spec;
  }
  if (const auto nodes = m.Find("nodes")) spec.nodes = static_cast<int>(nodes->Int(1, kMaxDevices));
  spec.devices_per_node = static_cast<int>(m.Get("devices_per_node").Int(1, kMaxDevices));
  if (static_cast<int64_t>(spec.nodes) * spec.devices_per_node > kMaxDevices) {
    m.value().Fail("expected nodes * devices_per_node to be at most 2^16");
  }
  const auto links = m.Find("links");
  if (links) spec.links = ParseScopeLinks(*links);
  const auto has_scope = [&](std::string_view scope) {
    for (const LinkSpec& link : spec.links) {
      if (link.scope == scope) return true;
    }
    return false;
  };
  const Value& where = links ? *links : m.value();
  if (spec.nodes > 1 && !has_scope("cluster")) {
    where.Fail(fmt::format("expected a link with scope: cluster (topology has {} nodes)", spec.nodes));
  }
  if (spec.nodes == 1 && spec.devices_per_node > 1 && !has_scope("node")) {
    where.Fail(fmt::format("expected a link with scope: node (the node has {} devices)", spec.devices_per_node));
  }
  return spec;
}

ModelSpec ParseModel(const Value& value, int ranks) {
  const Map m(value, {"transformer", "mlp", "costs", "profile"});
  ModelSpec model;
  if (!m.Has("transformer") && !m.Has("mlp") && !m.Has("costs") && !m.Has("profile")) {
    value.Fail("expected at least one of transformer, mlp, costs or profile");
  }
  if (m.Has("transformer") && m.Has("mlp")) m.Get("mlp").Fail("expected either transformer or mlp, not both");
  if (const auto t = m.Find("transformer")) model.transformer = ParseTransformer(*t);
  if (const auto mlp = m.Find("mlp")) model.mlp = ParseMlp(*mlp);
  if (const auto costs = m.Find("costs")) model.costs = ParseCosts(*costs, ranks);
  if (const auto profile = m.Find("profile")) model.profile_path = profile->ReadableFilePath();
  return model;
}

}  // namespace stagecraft::sim::detail
