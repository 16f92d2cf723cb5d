// The `topology:` and `model:` blocks of a scenario (DESIGN.md §3), read value by value; how the
// values fit together is Validate's (validate.h).
#include <fmt/format.h>

#include <memory>
#include <string>

#include "scenario_parse.h"
#include "stagecraft/sim/limits.h"
#include "stagecraft/sim/profile_yaml.h"

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
    link.scope = m.Get("scope").Enum(kLinkScopeNames);
    link.bandwidth_bytes_per_s = m.Get("bandwidth").Bandwidth();
    link.latency_ns = m.Get("latency").DurationNs();
    links.push_back(link);
  }
  return links;
}

void ParseGraph(const Map& m, TopologySpec* spec) {
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
    if (const auto kind = v.Find("kind")) vertex.kind = kind->Enum(kVertexKindNames);
    spec->vertices.push_back(vertex);
  }
  for (const Value& element : m.Get("links").Elements()) {
    const Map l(element, {"a", "b", "bandwidth", "latency"});
    GraphLinkSpec link;
    link.a = l.Get("a").String();
    link.b = l.Get("b").String();
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
  return t;  // its dtype is the run's precision (ResolvePrecision)
}

MlpSpec ParseMlp(const Value& value) {
  const Map m(value, {"layers", "hidden", "residual", "activation", "loss"});
  MlpSpec mlp;
  mlp.layers = static_cast<int>(m.Get("layers").Int(1, kMaxLayers));
  mlp.hidden = static_cast<int>(m.Get("hidden").Int(1, kMaxHidden));
  if (const auto residual = m.Find("residual")) mlp.residual = residual->Bool();
  if (const auto activation = m.Find("activation")) mlp.activation = activation->Enum(kActivationNames);
  if (const auto loss = m.Find("loss")) mlp.loss = loss->Enum(kLossNames);
  return mlp;
}

// A scalar for every rank, or a list of one entry per rank (Validate counts them).
template <class Read>
std::vector<int64_t> PerRank(const Value& value, int ranks, Read read) {
  if (!value.IsSequence()) return std::vector<int64_t>(ranks, read(value));
  if (value.node().size() > static_cast<size_t>(kMaxRanks)) {
    value.Fail(fmt::format("expected at most 2^16 entries (one per rank), got {}", value.node().size()));
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
  if (const auto links = m.Find("links")) spec.links = ParseScopeLinks(*links);
  return spec;
}

ModelSpec ParseModel(const Value& value, int ranks) {
  const Map m(value, {"transformer", "mlp", "costs", "profile"});
  ModelSpec model;
  if (const auto t = m.Find("transformer")) model.transformer = ParseTransformer(*t);
  if (const auto mlp = m.Find("mlp")) model.mlp = ParseMlp(*mlp);
  if (const auto costs = m.Find("costs")) model.costs = ParseCosts(*costs, ranks);
  if (const auto profile = m.Find("profile")) {
    model.profile_path = profile->ReadableFilePath();
    model.profile = std::make_shared<const Profile>(LoadProfile(model.profile_path));  // read once
  }
  return model;
}

}  // namespace stagecraft::sim::detail
