// The `topology:` and `model:` blocks of a scenario (DESIGN.md §3), read value by value; how the
// values fit together is Validate's (validate.h).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <memory>
#include <string>

#include "scenario_parse.h"
#include "stagecraft/base/input_file.h"
#include "stagecraft/scenario/limits.h"
#include "stagecraft/scenario/profile_yaml.h"

#ifndef STAGECRAFT_DEVICE_LIBRARY  // a build that does not name its source tree (the fuzz harnesses)
#define STAGECRAFT_DEVICE_LIBRARY "scenarios/devices"
#endif

namespace stagecraft::sim::detail {
namespace {

using yaml::Map;
using yaml::Value;

constexpr int64_t kMinTimeSliceNs = 10'000;  // a device's time_slice, when not 0

// Where `topology.device: NAME` is looked up: devices/ beside the file that names it, then
// ../devices/ (a topology in scenarios/topologies/ finds scenarios/devices/), then the device
// library of the source tree this binary was built from.
std::vector<std::string> DeviceFileCandidates(const Value& name_value, const std::string& name) {
  const std::filesystem::path dir(name_value.origin().dir.empty() ? "." : name_value.origin().dir);
  const std::string file = name + ".yaml";
  return {(dir / "devices" / file).lexically_normal().string(), (dir / ".." / "devices" / file).lexically_normal().string(),
          (std::filesystem::path(STAGECRAFT_DEVICE_LIBRARY) / file).string()};
}

// `peak`: one rate (at the scenario's precision) or a map of rates by dtype.
void ParsePeak(const Value& value, DeviceSpec* device) {
  if (!value.IsMap()) {
    device->peak_flops = value.Flops();
    return;
  }
  const Map m(value, {"fp32", "tf32", "bf16", "fp16", "fp8"});
  bool any = false;
  for (const EnumName<Dtype>& d : kDtypeNames) {
    if (const auto rate = m.Find(d.name)) {
      device->peak_by_dtype[static_cast<int>(d.value)] = rate->Flops();
      any = true;
    }
  }
  if (!any) value.Fail("expected at least one of fp32, tf32, bf16, fp16, fp8");
}

GemmModel ParseGemm(const Value& value) {
  const Map m(value, {"max_efficiency", "sms", "tiles", "k_overhead", "batched_efficiency", "fp8_blockwise"});
  GemmModel gemm;
  gemm.max_efficiency = m.Get("max_efficiency").DoubleIn(kMinEfficiency, 1.0, "a fraction of peak");
  gemm.sms = static_cast<int>(m.Get("sms").Int(1, kMaxStreamingMultiprocessors));
  const Value tiles = m.Get("tiles");
  for (const Value& tile : tiles.Elements()) {
    const std::vector<Value> mn = tile.Elements();
    if (mn.size() != 2) tile.Fail("expected a tile as [m, n]");
    gemm.tiles.emplace_back(static_cast<int>(mn[0].Int(1, kMaxGemmTile)), static_cast<int>(mn[1].Int(1, kMaxGemmTile)));
  }
  if (gemm.tiles.empty()) tiles.Fail("expected at least one tile [m, n]");
  if (const auto k = m.Find("k_overhead")) gemm.k_overhead = k->DoubleIn(0, kMaxGemmTile, "a number of k steps");
  if (const auto e = m.Find("batched_efficiency")) gemm.batched_efficiency = e->DoubleIn(kMinEfficiency, 1.0, "a fraction");
  if (const auto fp8 = m.Find("fp8_blockwise")) {  // {max_efficiency, k_overhead}: block-scaled FP8 GEMMs' own
    const Map f(*fp8, {"max_efficiency", "k_overhead"});
    gemm.blockwise_max_efficiency = f.Get("max_efficiency").DoubleIn(kMinEfficiency, 1.0, "a fraction of the FP8 peak");
    gemm.blockwise_k_overhead = f.Get("k_overhead").DoubleIn(0, kMaxGemmTile, "a number of k steps");
  }
  return gemm;
}

// `memory_kernels: {NAME: RATE, ...}`: each a memory-bound kernel of the list, once.
// `known`: the names a kernel may have, sorted (null: any).
std::vector<std::pair<std::string, double>> ParseMemoryKernels(const Value& value,
                                                                const std::vector<std::string>* known) {
  if (!value.IsMap()) {
    value.Fail(fmt::format("expected a map of memory-bound kernel names to rates, such as {{softmax: 0.5}}, got {}",
                           value.Describe()));
  }
  std::vector<std::pair<std::string, double>> rates;
  for (const auto& entry : value.node()) {
    if (!entry.first.IsScalar()) value.Fail("expected kernel names as the keys");
    const std::string name = entry.first.Scalar();
    const Value rate = value.Child(name, entry.second);
    if (known != nullptr && !std::binary_search(known->begin(), known->end(), name)) {
      rate.Fail(fmt::format("'{}' is not a memory-bound kernel of the list (one of: {})", name, fmt::join(*known, ", ")));
    }
    for (const auto& [seen, unused] : rates) {
      if (seen == name) rate.Fail(fmt::format("'{}' is named twice", name));
    }
    rates.emplace_back(name, rate.DoubleIn(kMinEfficiency, kMaxMemoryKernelRate, "a rate relative to memory_efficiency's"));
  }
  return rates;
}

DeviceSpec ParseDeviceFields(const Value& value, const std::vector<std::string>* memory_kernels) {
  const Map m(value, {"name", "peak", "memory", "efficiency", "memory_bandwidth", "memory_efficiency",
                      "memory_kernels", "launch_overhead", "gemm", "time_slice", "copy_engine"});
  DeviceSpec device;
  device.name = m.Get("name").String();
  ParsePeak(m.Get("peak"), &device);
  device.memory_bytes = m.Get("memory").Bytes(1);
  if (const auto e = m.Find("efficiency")) device.efficiency = e->DoubleIn(kMinEfficiency, 1.0);
  if (const auto bw = m.Find("memory_bandwidth")) device.memory_bandwidth = bw->Bandwidth();
  if (const auto e = m.Find("memory_efficiency")) device.memory_efficiency = e->DoubleIn(kMinEfficiency, 1.0, "a fraction");
  if (const auto k = m.Find("memory_kernels")) device.memory_kernel_rates = ParseMemoryKernels(*k, memory_kernels);
  if (const auto l = m.Find("launch_overhead")) device.launch_overhead_ns = l->DurationNs();
  if (const auto g = m.Find("gemm")) device.gemm = ParseGemm(*g);
  if (const auto t = m.Find("time_slice")) {
    device.time_slice_ns = t->DurationNs();
    // Shorter turns than a scheduler's would only multiply the simulator's events.
    if (device.time_slice_ns > 0 && device.time_slice_ns < kMinTimeSliceNs) {
      t->Fail(fmt::format("expected 0 (processor sharing) or a turn of at least 10us, got {}", t->Describe()));
    }
  }
  if (const auto c = m.Find("copy_engine")) device.copy_engine = c->Bool();
  if (device.gemm.stated() != (device.memory_bandwidth > 0)) {
    (device.gemm.stated() ? m.Get("gemm") : m.Get("memory_bandwidth"))
        .Fail("the roofline model needs both memory_bandwidth and gemm (state both, or neither for the flat "
              "FLOPs model)");
  }
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

// A device's fields at `value`; `include`: set when they came from the library (their errors
// name its file, or the --set that replaced a field since).
DeviceSpec ParseDevice(const Value& value, const DeviceInclude* include, const std::vector<std::string>* memory_kernels) {
  if (include == nullptr) return ParseDeviceFields(value, memory_kernels);
  const Value located(value.node(), value.path(),
                      yaml::Origin{include->file, yaml::DirOf(include->file), value.origin().override_index, false},
                      value.overrides());
  DeviceSpec device = ParseDeviceFields(located, memory_kernels);
  device.source = include->file;
  return device;
}

// `groups: [{nodes, devices_per_node, device}, ...]`, at least one.
std::vector<NodeGroupSpec> ParseGroups(const Value& value, const DeviceIncludes& includes,
                                       const std::vector<std::string>* memory_kernels) {
  std::vector<NodeGroupSpec> groups;
  const std::vector<Value> elements = value.Elements();
  if (elements.empty()) value.Fail("expected at least one group {nodes, devices_per_node, device}");
  for (size_t g = 0; g < elements.size(); ++g) {
    const Map m(elements[g], {"nodes", "devices_per_node", "device"});
    NodeGroupSpec group;
    if (const auto nodes = m.Find("nodes")) group.nodes = static_cast<int>(nodes->Int(1, kMaxDevices));
    group.devices_per_node = static_cast<int>(m.Get("devices_per_node").Int(1, kMaxDevices));
    const auto include = includes.groups.find(static_cast<int>(g));
    group.device = ParseDevice(m.Get("device"), include != includes.groups.end() ? &include->second : nullptr,
                               memory_kernels);
    groups.push_back(std::move(group));
  }
  return groups;
}

// `host: {memory, bandwidth, latency}`.
HostSpec ParseHost(const Value& value) {
  const Map m(value, {"memory", "bandwidth", "latency", "memory_bandwidth", "device_bandwidth"});
  HostSpec host;
  host.memory_bytes = m.Get("memory").Bytes(1);
  host.bandwidth_bytes_per_s = m.Get("bandwidth").Bandwidth();
  if (const auto latency = m.Find("latency")) host.latency_ns = latency->DurationNs();
  if (const auto bw = m.Find("memory_bandwidth")) host.memory_bandwidth_bytes_per_s = bw->Bandwidth();
  if (const auto bw = m.Find("device_bandwidth")) host.device_bandwidth_bytes_per_s = bw->Bandwidth();
  return host;
}

// model.transformer.moe: capacity_factor or dropless (the default), not both; load_imbalance only
// dropless.
MoeSpec ParseMoe(const Value& value, int layers) {
  const Map m(value, {"experts", "top_k", "expert_hidden", "shared_experts", "every", "first_dense", "capacity_factor",
                      "dropless", "load_imbalance", "node_limit"});
  MoeSpec moe;
  moe.experts = static_cast<int>(m.Get("experts").Int(1, kMaxExperts));
  if (const auto v = m.Find("top_k")) moe.top_k = static_cast<int>(v->Int(1, moe.experts));
  if (const auto v = m.Find("expert_hidden")) moe.expert_hidden = static_cast<int>(v->Int(1, kMaxHidden * 8));
  if (const auto v = m.Find("shared_experts")) moe.shared_experts = static_cast<int>(v->Int(0, kMaxExperts));
  if (const auto v = m.Find("every")) moe.every = static_cast<int>(v->Int(1, layers));
  if (const auto v = m.Find("first_dense")) moe.first_dense = static_cast<int>(v->Int(0, layers - 1));
  if (const auto v = m.Find("node_limit")) moe.node_limit = static_cast<int>(v->Int(1, kMaxExperts));
  const auto capacity = m.Find("capacity_factor");
  if (capacity) moe.capacity_factor = capacity->Double(0.0, 1024.0);
  if (const auto v = m.Find("dropless")) {
    if (capacity && v->Bool()) v->Fail("expected either dropless: true or a capacity_factor, not both");
    if (!capacity && !v->Bool()) v->Fail("expected a capacity_factor with dropless: false");
  }
  if (const auto v = m.Find("load_imbalance")) {
    if (capacity) v->Fail("expected none with a capacity_factor: each expert is padded to its capacity");
    moe.load_imbalance = v->Double(0.0, 1e9);
    if (moe.load_imbalance < 1 || moe.load_imbalance > 1024) {
      v->Fail(fmt::format("expected a number in [1, 1024] (the busiest device's rows over its even share; 1: "
                          "balanced), got {}",
                          moe.load_imbalance));
    }
  }
  return moe;
}

// model.transformer.mla: the key-value latent's rank is what makes it MLA; the others default to
// none (no query latent, no rotary part) and head_dim (the values' width).
MlaSpec ParseMla(const Value& value) {
  const Map m(value, {"q_lora_rank", "kv_lora_rank", "rope_head_dim", "v_head_dim"});
  MlaSpec mla;
  mla.kv_lora_rank = static_cast<int>(m.Get("kv_lora_rank").Int(1, kMaxHidden));
  if (const auto v = m.Find("q_lora_rank")) mla.q_lora_rank = static_cast<int>(v->Int(0, kMaxHidden));
  if (const auto v = m.Find("rope_head_dim")) mla.rope_head_dim = static_cast<int>(v->Int(0, kMaxHidden));
  if (const auto v = m.Find("v_head_dim")) mla.v_head_dim = static_cast<int>(v->Int(1, kMaxHidden));
  return mla;
}

// model.transformer.sliding_window: its size (the keys a query sees, itself included) and how
// often a layer attends to its whole past instead (0, the default: never).
WindowSpec ParseWindow(const Value& value) {
  const Map m(value, {"size", "full_every"});
  WindowSpec window;
  window.size = static_cast<int>(m.Get("size").Int(1, kMaxSeq));
  if (const auto v = m.Find("full_every")) window.full_every = static_cast<int>(v->Int(0, kMaxLayers));
  return window;
}

TransformerSpec ParseTransformer(const Value& value) {
  const Map m(value, {"layers", "hidden", "heads", "seq", "vocab", "dtype", "dropout", "ffn_hidden", "activation",
                      "kv_heads", "tied_embeddings", "moe", "head_dim", "attention", "bias", "mla",
                      "sliding_window"});
  TransformerSpec t;
  t.layers = static_cast<int>(m.Get("layers").Int(1, kMaxLayers));
  t.hidden = static_cast<int>(m.Get("hidden").Int(1, kMaxHidden));
  t.heads = static_cast<int>(m.Get("heads").Int(1, kMaxHeads));
  t.seq = static_cast<int>(m.Get("seq").Int(1, kMaxSeq));
  t.vocab = static_cast<int>(m.Get("vocab").Int(1, kMaxVocab));
  if (const auto dropout = m.Find("dropout")) t.dropout = dropout->Bool();
  if (const auto v = m.Find("ffn_hidden")) t.ffn_hidden = static_cast<int>(v->Int(1, kMaxHidden * 8));
  if (const auto v = m.Find("activation")) t.activation = v->Enum(kFfnActivationNames);
  if (const auto v = m.Find("kv_heads")) t.kv_heads = static_cast<int>(v->Int(1, kMaxHeads));
  if (const auto v = m.Find("tied_embeddings")) t.tied_embeddings = v->Bool();
  if (const auto v = m.Find("bias")) t.bias = v->Bool();
  if (const auto v = m.Find("head_dim")) t.head_dim = static_cast<int>(v->Int(1, kMaxHidden));
  if (const auto v = m.Find("attention")) t.attention = v->Enum(kAttentionKernelNames);
  if (const auto v = m.Find("moe")) t.moe = ParseMoe(*v, t.layers);
  if (const auto v = m.Find("mla")) t.mla = ParseMla(*v);
  if (const auto v = m.Find("sliding_window")) t.window = ParseWindow(*v);
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

void ResolvePeak(const Value& device, Dtype dtype, DeviceSpec* spec) {
  std::string stated;
  for (const EnumName<Dtype>& d : kDtypeNames) {
    if (spec->peak_by_dtype[static_cast<int>(d.value)] > 0) stated += fmt::format("{}{}", stated.empty() ? "" : ", ", d.name);
  }
  if (stated.empty()) return;  // a scalar peak, at the scenario's precision
  spec->peak_flops = spec->peak_by_dtype[static_cast<int>(dtype)];
  if (spec->peak_flops > 0) return;
  const std::string what = fmt::format("device {} states no peak for the scenario's precision {} (it states {})",
                                       spec->name, Name(dtype), stated);
  if (!spec->source.empty()) device.Fail(what);
  device.At("peak").Fail(what);
}

std::string DeviceFile(const Value& name_value) {
  const std::string name = name_value.String();
  const bool plain = std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '-' || c == '_' || c == '.';
  });
  if (!plain || name.front() == '.') {
    name_value.Fail(fmt::format("expected a device name of letters, digits, '.', '-' and '_' (a file of the device "
                                "library, scenarios/devices/NAME.yaml) or a map of the device's fields, got '{}'",
                                name));
  }
  const std::vector<std::string> candidates = DeviceFileCandidates(name_value, name);
  std::vector<std::string> library;  // the names the looked-in folders hold, for "did you mean"
  for (const std::string& file : candidates) {
    std::error_code ec;
    // A file of that name that is not a regular file (a FIFO, a folder) is an error, not a miss.
    if (std::filesystem::exists(std::filesystem::symlink_status(file, ec))) {
      try {
        CheckInputFile(file);
      } catch (const InputError& e) {
        name_value.Fail(fmt::format("device '{}': {}", name, e.what()));
      }
      return file;
    }
    for (const auto& entry : std::filesystem::directory_iterator(std::filesystem::path(file).parent_path(), ec)) {
      if (entry.path().extension() == ".yaml") library.push_back(entry.path().stem().string());
    }
  }
  std::sort(library.begin(), library.end());
  library.erase(std::unique(library.begin(), library.end()), library.end());
  const std::vector<std::string_view> known(library.begin(), library.end());
  name_value.Fail(fmt::format("no device '{}' in the device library (looked for {}){}", name, fmt::join(candidates, ", "),
                              yaml::DidYouMean(name, known)));
}

TopologySpec ParseTopology(const Value& value, const DeviceIncludes& includes,
                           const std::vector<std::string>* memory_kernels) {
  const Map m(value, {"device", "nodes", "devices_per_node", "groups", "host", "links", "vertices"});
  TopologySpec spec;
  if (const auto host = m.Find("host")) spec.host = ParseHost(*host);
  if (const auto groups = m.Find("groups")) {
    for (const char* key : {"device", "nodes", "devices_per_node", "vertices"}) {
      if (const auto found = m.Find(key)) {
        found->Fail("not used with topology.groups (each group states its nodes, devices_per_node and device)");
      }
    }
    spec.groups = ParseGroups(*groups, includes, memory_kernels);
  } else {
    spec.device = ParseDevice(m.Get("device"), includes.device ? &*includes.device : nullptr, memory_kernels);
  }
  if (m.Has("vertices")) {
    if (const auto host = m.Find("host")) {
      host->Fail("not used with an explicit graph yet (a host per node needs the per-dimension form: nodes, "
                 "devices_per_node)");
    }
    for (const char* key : {"nodes", "devices_per_node"}) {
      if (const auto found = m.Find(key)) {
        found->Fail("not used with an explicit graph (the devices are the vertices with kind: device)");
      }
    }
    ParseGraph(m, &spec);
    return spec;
  }
  if (!spec.grouped()) {
    if (const auto nodes = m.Find("nodes")) spec.nodes = static_cast<int>(nodes->Int(1, kMaxDevices));
    spec.devices_per_node = static_cast<int>(m.Get("devices_per_node").Int(1, kMaxDevices));
  }
  if (const auto links = m.Find("links")) spec.links = ParseScopeLinks(*links);
  return spec;
}

void ResolvePeaks(const Value& topology, Dtype dtype, TopologySpec* spec) {
  if (!spec->grouped()) {
    ResolvePeak(topology.At("device"), dtype, &spec->device);
    return;
  }
  for (size_t g = 0; g < spec->groups.size(); ++g) {
    ResolvePeak(topology.At(fmt::format("groups.{}.device", g)), dtype, &spec->groups[g].device);
  }
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
