// Validate (validate.h): the checks that tie a scenario's values together, each reported under
// the key it is about; an engine's checks (the machine, the derived limits) at their places.
#include "stagecraft/scenario/validate.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <numeric>
#include <set>

#include "stagecraft/scenario/limits.h"
#include "validate_detail.h"

namespace stagecraft::sim {
namespace {

using detail::Problems;

// A device's facts in range (a device built in code may hold them out of range, or half of the
// roofline's); `key`: where it is stated.
template <class Count, class Rate>
void CheckDevice(const DeviceSpec& d, const std::string& key, const std::vector<std::string>* memory_kernels,
                 const Count& count, const Rate& rate, Problems* out) {
  rate(key + ".peak", d.peak_flops, kMinPeakFlops, kMaxPeakFlops);
  rate(key + ".efficiency", d.efficiency, kMinEfficiency, 1.0);
  if (const GemmModel& g = d.gemm; g.stated() || d.memory_bandwidth > 0) {
    rate(key + ".memory_bandwidth", d.memory_bandwidth, kMinBandwidthBytesPerS, kMaxBandwidthBytesPerS);
    rate(key + ".memory_efficiency", d.memory_efficiency, kMinEfficiency, 1.0);
    rate(key + ".gemm.max_efficiency", g.max_efficiency, kMinEfficiency, 1.0);
    rate(key + ".gemm.batched_efficiency", g.batched_efficiency, kMinEfficiency, 1.0);
    count(key + ".gemm.sms", g.sms, kMaxStreamingMultiprocessors);
    if (g.tiles.empty()) out->Add(key + ".gemm.tiles", "expected at least one tile [m, n]");
    for (const auto& [m, n] : g.tiles) {
      count(key + ".gemm.tiles", m, kMaxGemmTile);
      count(key + ".gemm.tiles", n, kMaxGemmTile);
    }
  }
  for (const auto& [name, value] : d.memory_kernel_rates) {
    const std::string at = key + ".memory_kernels." + name;
    if (memory_kernels != nullptr && !std::binary_search(memory_kernels->begin(), memory_kernels->end(), name)) {
      out->Add(at, "not a memory-bound kernel of the list");
    } else {
      rate(at, value, kMinEfficiency, kMaxMemoryKernelRate);
    }
  }
}

// The counts a scenario built in code may hold out of their ranges (the loader checks each as
// it reads it, with the same limits), so that no later check divides by zero or overflows.
bool CheckRanges(const Scenario& s, const std::vector<std::string>* memory_kernels, Problems* out) {
  const size_t before = out->size();
  const auto count = [&](std::string_view key, int64_t value, int64_t max) {
    if (value < 1 || value > max) out->Add(key, fmt::format("expected an integer in [1, {}], got {}", max, value));
  };
  const auto rate = [&](std::string_view key, double value, double min, double max) {
    if (!(value >= min && value <= max)) {
      out->Add(key, fmt::format("expected from {:g} to {:g}, got {:g}", min, max, value));
    }
  };
  const TopologySpec& t = s.topology;
  for (int g = 0; g < t.group_count(); ++g) {
    CheckDevice(t.GroupDevice(g), t.grouped() ? fmt::format("topology.groups.{}.device", g) : "topology.device",
                memory_kernels, count, rate, out);
  }
  if (t.host.stated()) {
    rate("topology.host.bandwidth", t.host.bandwidth_bytes_per_s, kMinBandwidthBytesPerS, kMaxBandwidthBytesPerS);
  }
  if (!t.explicit_graph() && !t.grouped()) {
    count("topology.nodes", t.nodes, kMaxDevices);
    count("topology.devices_per_node", t.devices_per_node, kMaxDevices);
  }
  for (size_t g = 0; g < t.groups.size(); ++g) {
    count(fmt::format("topology.groups.{}.nodes", g), t.groups[g].nodes, kMaxDevices);
    count(fmt::format("topology.groups.{}.devices_per_node", g), t.groups[g].devices_per_node, kMaxDevices);
  }
  const PipelineSpec& p = s.pipeline;
  count("pipeline.ranks", p.ranks, kMaxRanks);
  if (p.chunks != 0) count("pipeline.chunks", p.chunks, kMaxChunks);  // 0: not stated
  count("pipeline.microbatches", p.microbatches, kMaxMicrobatches);
  count("pipeline.microbatch_size", p.microbatch_size, kMaxMicrobatchSize);
  count("pipeline.steps", p.steps, kMaxSteps);
  count("pipeline.data_parallel", p.data_parallel, kMaxDevices);
  count("pipeline.tensor_parallel", p.tensor_parallel, kMaxTensorParallel);
  count("pipeline.context_parallel", p.context_parallel, kMaxTensorParallel);
  if (p.zero < 0 || p.zero > 3) out->Add("pipeline.zero", fmt::format("expected 0, 1, 2 or 3, got {}", p.zero));
  if (const auto& tr = s.model.transformer) {
    count("model.transformer.layers", tr->layers, kMaxLayers);
    count("model.transformer.hidden", tr->hidden, kMaxHidden);
    count("model.transformer.heads", tr->heads, kMaxHeads);
    count("model.transformer.seq", tr->seq, kMaxSeq);
    count("model.transformer.vocab", tr->vocab, kMaxVocab);
  }
  if (const auto& mlp = s.model.mlp) {
    count("model.mlp.layers", mlp->layers, kMaxLayers);
    count("model.mlp.hidden", mlp->hidden, kMaxHidden);
  }
  return out->size() == before;
}

// Per dimension: a link for each scope (switch) the devices use; false when their count is out of range.
bool CheckScopeLinks(const TopologySpec& t, Problems* out) {
  int64_t devices = int64_t{t.nodes} * t.devices_per_node;
  if (t.grouped()) {
    devices = 0;
    for (const NodeGroupSpec& g : t.groups) devices += int64_t{g.nodes} * g.devices_per_node;
  }
  if (devices > kMaxDevices) {
    out->Add("topology", fmt::format("expected {} to be at most 2^16",
                                     t.grouped() ? "the groups' nodes * devices_per_node summed" : "nodes * devices_per_node"));
    return false;
  }
  bool scopes[2] = {false, false};
  for (size_t i = 0; i < t.links.size(); ++i) {
    bool& seen = scopes[t.links[i].scope == LinkScope::kNode ? 0 : 1];
    if (seen) {
      out->Add(fmt::format("topology.links.{}.scope", i),
               fmt::format("a second link with scope '{}'", Name(t.links[i].scope)));
    }
    seen = true;
  }
  const int nodes = t.node_count();
  if (nodes > 1 && !scopes[1]) {
    out->Add("topology.links", fmt::format("expected a link with scope: cluster (topology has {} nodes)", nodes));
  }
  if (nodes == 1 && t.DevicesOnNode(0) > 1 && !scopes[0]) {
    out->Add("topology.links",
             fmt::format("expected a link with scope: node (the node has {} devices)", t.DevicesOnNode(0)));
  }
  return true;
}

// An explicit graph: distinct vertex names, a device among them, links between known vertices.
void CheckGraph(const TopologySpec& t, Problems* out) {
  std::set<std::string> names;
  for (size_t i = 0; i < t.vertices.size(); ++i) {
    if (!names.insert(t.vertices[i].name).second) {
      out->Add(fmt::format("topology.vertices.{}.name", i),
               fmt::format("vertex '{}' is listed twice", t.vertices[i].name));
    }
  }
  if (t.devices() == 0) out->Add("topology.vertices", "expected at least one vertex with kind: device");
  for (size_t i = 0; i < t.graph_links.size(); ++i) {
    const GraphLinkSpec& link = t.graph_links[i];
    for (const auto& [end, name] : {std::pair{"a", &link.a}, std::pair{"b", &link.b}}) {
      if (names.count(*name) == 0) {
        out->Add(fmt::format("topology.links.{}.{}", i, end),
                 fmt::format("unknown vertex '{}' (vertices: {})", *name, fmt::join(names, ", ")));
      }
    }
    if (link.a == link.b) {
      out->Add(fmt::format("topology.links.{}.b", i), fmt::format("a link from '{}' to itself", link.a));
    }
  }
}

// The topology's own facts, then the engine's machine built from it (the simulator's routes
// must join every pair of devices). `counted`: whether its device count is in range.
void CheckTopology(const TopologySpec& t, EngineChecks& checks, bool* counted, Problems* out) {
  const size_t before = out->size();
  *counted = true;
  if (t.explicit_graph()) {
    CheckGraph(t, out);
  } else if (!CheckScopeLinks(t, out)) {
    *counted = false;
    return;
  }
  if (out->size() != before) return;
  if (std::string why = checks.CheckMachine(t); !why.empty()) out->Add("topology", std::move(why));
}

// Each schedule named accepts the parameters it runs with. A stated pipeline.chunks (the stages
// per rank of the schedules that interleave) that an interleaving schedule cannot run with, where
// its own would do, or that no schedule named takes, is reported at pipeline.chunks, under
// `schedule: all` too (never changed, never makes a schedule of `all` skipped).
void CheckSchedules(const PipelineSpec& p, Problems* out) {
  std::vector<const schedules::GeneratorInfo*> named;
  if (p.runs_all()) {
    for (const schedules::GeneratorInfo& info : schedules::Generators()) {
      if (!info.uses_costs && info.in_all) named.push_back(&info);
    }
  }
  for (const std::string& name : p.runs_all() ? std::vector<std::string>{} : p.schedules) {
    if (p.schedule_files.contains(name)) continue;  // checked when imported
    if (name == kSearchedSchedule) continue;         // made from the generators that fit
    const schedules::GeneratorInfo* info = schedules::FindGenerator(name);
    if (info == nullptr) {
      out->Add("pipeline.schedule", detail::UnknownSchedule(name, p.schedules.size() == 1));
    } else {
      named.push_back(info);
    }
  }
  std::vector<std::string> contradicted;  // under `all`: the schedules the stated chunks contradicts
  bool taken = !p.schedule_files.empty();   // a file's import takes chunks too (its stages per rank)
  for (const schedules::GeneratorInfo* info : named) {
    taken |= info->interleaved;
    const schedules::GeneratorParams params = GeneratorParamsFor(p, *info);
    const std::string why = schedules::CheckParams(*info, params);
    if (why.empty()) continue;
    schedules::GeneratorParams own = params;
    own.chunks = schedules::ChunksFor(*info, 0);
    if (p.chunks != 0 && schedules::CheckParams(*info, own).empty()) {
      if (p.runs_all()) {
        contradicted.push_back(fmt::format("{} runs {}", info->name, own.chunks));
      } else {
        // The generator's reason names the schedule and the chunks it needs.
        out->Add("pipeline.chunks", fmt::format("{}; without pipeline.chunks, {} takes {}",
                                                why.substr(info->name.size() + 2), info->name, own.chunks));
      }
    } else if (!p.runs_all()) {
      out->Add("pipeline.schedule", why);  // under `all`, a schedule that cannot run is skipped
    }
  }
  if (p.chunks > 1 && !taken && !named.empty()) {
    out->Add("pipeline.chunks", fmt::format("{} stages per rank applies to the schedules that interleave (interleaved, "
                                            "zb-v, dualpipe-v), and no schedule named does: each of them runs one "
                                            "stage per rank; leave pipeline.chunks out or name one that interleaves",
                                            p.chunks));
  }
  if (!contradicted.empty()) {
    out->Add("pipeline.chunks", fmt::format("{} stage(s) per rank contradicts schedules of `all` ({}); under schedule: "
                                            "all leave chunks out (each schedule runs its own), or name the schedules",
                                            p.chunks, fmt::join(contradicted, ", ")));
  }
}

// The data-, context- and tensor-parallel degrees: the world they make fits the topology, the
// placement names each axis once, and what shards over T can be sharded.
void CheckParallelism(const Scenario& s, bool devices_counted, Problems* out) {
  const PipelineSpec& p = s.pipeline;
  const bool hybrid = p.data_parallel > 1 || p.tensor_parallel > 1 || p.context_parallel > 1;
  const std::string shared = p.ranks_per_device > 1 ? fmt::format(" ({} ranks per device)", p.ranks_per_device) : "";
  if (p.ranks_per_device > p.ranks) {
    out->Add("pipeline.ranks_per_device", fmt::format("{} ranks per device but pipeline.ranks is {}",
                                                      p.ranks_per_device, p.ranks));
  } else if (devices_counted && !hybrid && p.devices() > s.topology.devices()) {
    out->Add("pipeline.ranks", fmt::format("topology has {} devices but pipeline.ranks is {}{}", s.topology.devices(),
                                           p.ranks, shared));
  } else if (devices_counted && p.devices() > s.topology.devices()) {
    out->Add("pipeline", fmt::format("the job needs pipeline.ranks x data_parallel x {}tensor_parallel = {} x {} x {}{} "
                                     "= {} {}{} but the topology has {}",
                                     p.context_parallel > 1 ? "context_parallel x " : "", p.ranks, p.data_parallel,
                                     p.context_parallel > 1 ? fmt::format("{} x ", p.context_parallel) : "",
                                     p.tensor_parallel, p.world(), p.ranks_per_device > 1 ? "ranks" : "devices",
                                     p.ranks_per_device > 1 ? fmt::format(", {} devices at {} ranks per device",
                                                                          p.devices(), p.ranks_per_device)
                                                            : "",
                                     s.topology.devices()));
  }
  if (p.ranks_per_device > 1 && s.topology.grouped()) {
    for (const NodeGroupSpec& g : s.topology.groups) {
      if (g.device.time_slice_ns != s.topology.groups.front().device.time_slice_ns) {
        out->Add("pipeline.ranks_per_device", "ranks sharing a device need the node groups' devices to share one "
                                              "time_slice (they state different ones)");
        break;
      }
    }
  }
  std::vector<Axis> axes = p.placement;
  std::sort(axes.begin(), axes.end());
  if (axes != std::vector<Axis>{Axis::kTensor, Axis::kData, Axis::kPipeline}) {
    out->Add("pipeline.placement", "expected the three axes tensor, data and pipeline, each once, innermost first");
  }
  if (p.sequence_parallel && p.tensor_parallel == 1) {
    out->Add("pipeline.sequence_parallel", "shards the activations over the tensor-parallel group: it needs "
                                           "pipeline.tensor_parallel > 1");
  }
  if (p.tensor_parallel > 1 && !s.model.transformer) {
    out->Add("pipeline.tensor_parallel", "only model.transformer's cost model shards layers over a tensor-parallel "
                                         "group (for model.costs or a profile, state one shard's costs)");
  }
  if (p.recompute == Recompute::kSelective && !s.model.transformer) {
    out->Add("pipeline.recompute", "selective recomputes the attention's softmax and dropout: it needs "
                                   "model.transformer (none and full work for every model)");
  }
  if (const auto& t = s.model.transformer; t && t->heads > 0 && t->heads % p.tensor_parallel != 0) {
    out->Add("pipeline.tensor_parallel", fmt::format("must divide model.transformer.heads ({}): each device holds "
                                                     "whole attention heads, got {}",
                                                     t->heads, p.tensor_parallel));
  } else if (t && t->heads > 0 && (t->KvHeads() % p.tensor_parallel != 0 || t->Ffn() % p.tensor_parallel != 0)) {
    out->Add("pipeline.tensor_parallel", fmt::format("must divide model.transformer's kv_heads ({}) and ffn_hidden "
                                                     "({}): each device holds whole key-value heads and an equal "
                                                     "share of the feed-forward, got {}",
                                                     t->KvHeads(), t->Ffn(), p.tensor_parallel));
  }
}

void CheckPipeline(const Scenario& s, bool devices_counted, Problems* out) {
  const PipelineSpec& p = s.pipeline;
  CheckParallelism(s, devices_counted, out);
  CheckOffload(s, devices_counted, out);
  if (int64_t{p.ranks} * p.chunks > kMaxStages) {
    out->Add("pipeline.chunks", fmt::format("expected pipeline.ranks x pipeline.chunks to be at most 2^20 stages, got "
                                            "{} x {}", p.ranks, p.chunks));
    return;
  }
  CheckSchedules(p, out);
}

// Layers against the most stages a schedule of the scenario runs (one it cannot run is
// reported with the schedule; a file's stages are known once it is imported).
void CheckLayers(const Scenario& s, std::string_view key, int layers, Problems* out) {
  const PipelineSpec& p = s.pipeline;
  const auto runs = RunGenerators(p);
  int64_t stages = p.schedule_files.empty() ? p.ranks : int64_t{p.ranks} * std::max(p.chunks, 1);
  std::string why = "pipeline.ranks x pipeline.chunks";
  for (const auto& [info, params] : runs) {
    if (int64_t{params.ranks} * params.chunks <= stages || !schedules::CheckParams(*info, params).empty()) continue;
    stages = int64_t{params.ranks} * params.chunks;
    why = params.chunks == p.chunks ? "pipeline.ranks x pipeline.chunks"
                                    : fmt::format("{} runs {} stages per rank", info->name, params.chunks);
  }
  const auto entries = static_cast<int64_t>(p.partition_layers.size());
  // A list of every stage's layers may leave the first and the last stage without one (the
  // embedding, or the head and loss, alone: Megatron-LM's --account-for-{embedding,loss}-in-
  // pipeline-split); the list's own rules check it instead.
  if (layers < stages && !(p.partition == Partition::kGiven && entries == stages)) {
    out->Add(fmt::format("{}.layers", key),
             fmt::format("expected at least {} layers, one per stage ({}), got {}", stages, why, layers));
  }
  if (p.partition != Partition::kGiven) return;
  for (int64_t i = 1; i + 1 < entries; ++i) {
    if (p.partition_layers[i] > 0) continue;
    return out->Add("pipeline.partition", fmt::format("gives stage {} no layer; only the first and the last stage "
                                                      "may have none (the embedding, or the head and loss, alone)", i));
  }
  const int64_t listed = std::accumulate(p.partition_layers.begin(), p.partition_layers.end(), int64_t{0});
  if (listed != layers) {
    return out->Add("pipeline.partition", fmt::format("expected {} layers in all ({}.layers), got {} stage(s) holding {}",
                                                      layers, key, entries, listed));
  }
  // For every schedule that runs: one entry per stage, or one per rank, each rank's layers then
  // split over its stages (sim/layer_split.h), which serves the schedules of every stage count.
  for (const auto& [info, params] : runs) {
    const int64_t own = int64_t{params.ranks} * params.chunks;
    if (entries == own) continue;
    if (entries == params.ranks) {
      for (int r = 0; r < params.ranks; ++r) {
        if (p.partition_layers[r] >= params.chunks) continue;
        out->Add("pipeline.partition", fmt::format("gives rank {} {} layer(s), fewer than the {} stages per rank {} "
                                                   "runs",
                                                   r, p.partition_layers[r], params.chunks, info->name));
        return;
      }
      continue;
    }
    const std::string chunks = params.chunks == 1 ? "one stage per rank"
                                                  : fmt::format("{} stages per rank", params.chunks);
    out->Add("pipeline.partition",
             fmt::format("lists {} stage(s), but {} runs {} ({} ranks, {}): give the layers of each stage, or of each "
                         "of the {} ranks",
                         entries, info->name, own, params.ranks, chunks, params.ranks));
    return;
  }
}

void CheckModel(const Scenario& s, Problems* out) {
  const ModelSpec& m = s.model;
  if (!m.transformer && !m.mlp && !m.costs && !m.profile && m.profile_path.empty()) {
    out->Add("model", "expected at least one of transformer, mlp, costs or profile");
  }
  if (m.transformer && m.mlp) out->Add("model.mlp", "expected either transformer or mlp, not both");
  detail::CheckTransformer(s, out);
  if (m.costs) {
    const ExplicitCosts& c = *m.costs;
    for (const auto& [key, list] :
         {std::pair{"forward", &c.forward_ns}, {"backward_input", &c.backward_input_ns},
          {"backward_weight", &c.backward_weight_ns}, {"activation_bytes", &c.activation_bytes},
          {"weight_bytes", &c.weight_bytes}}) {
      if (static_cast<int>(list->size()) != s.pipeline.ranks) {
        out->Add(fmt::format("model.costs.{}", key),
                 fmt::format("expected {} entries (one per rank), got {}", s.pipeline.ranks, list->size()));
      }
    }
  }
  const int model_layers = m.transformer ? m.transformer->layers : m.mlp ? m.mlp->layers : 0;
  if (model_layers > 0) CheckLayers(s, m.transformer ? "model.transformer" : "model.mlp", model_layers, out);
  if (!m.profile_path.empty() && !m.profile) {
    out->Add("model.profile", fmt::format("{} is named but not read (set model.profile to LoadProfile of it)",
                                          m.profile_path));
  }
  if (!m.profile) return;
  if (m.profile->microbatch_size != s.pipeline.microbatch_size) {
    out->Add("model.profile",
             fmt::format("profile was measured at microbatch_size {} but pipeline.microbatch_size is {}",
                         m.profile->microbatch_size, s.pipeline.microbatch_size));
  }
  if (model_layers != 0 && model_layers != static_cast<int>(m.profile->layers.size())) {
    out->Add("model.profile", fmt::format("profile has {} layers but the scenario's model has {}",
                                          m.profile->layers.size(), model_layers));
  }
}

}  // namespace

std::vector<std::pair<const schedules::GeneratorInfo*, schedules::GeneratorParams>> RunGenerators(
    const PipelineSpec& p) {
  std::vector<std::pair<const schedules::GeneratorInfo*, schedules::GeneratorParams>> run;
  for (const schedules::GeneratorInfo& info : schedules::Generators()) {
    if (!p.runs_all() && std::find(p.schedules.begin(), p.schedules.end(), info.name) == p.schedules.end()) continue;
    if (p.runs_all() && (info.uses_costs || !info.in_all)) continue;  // named, not in "all" (generators.h)
    const schedules::GeneratorParams params = GeneratorParamsFor(p, info);
    if (p.runs_all() && !schedules::CheckParams(info, params).empty()) continue;  // skipped
    run.emplace_back(&info, params);
  }
  return run;
}

namespace detail {

std::string UnknownSchedule(std::string_view name, bool alone) {
  return fmt::format("unknown schedule '{}' (known: {}, {}{}, or a .csv schedule file)", name,
                     schedules::GeneratorNames(), kSearchedSchedule, alone ? ", all" : "");
}

}  // namespace detail

std::vector<ScenarioProblem> Validate(const Scenario& s, EngineChecks& checks) {
  Problems problems;
  if (!CheckRanges(s, checks.MemoryKernelNames(), &problems)) return problems.list;
  bool devices_counted = false;
  CheckTopology(s.topology, checks, &devices_counted, &problems);
  CheckPipeline(s, devices_counted, &problems);
  CheckModel(s, &problems);
  detail::CheckTraining(s, &problems);
  detail::CheckExperts(s, &problems);
  // Every earlier failure adds a problem, so an empty list means the machine was built too.
  if (problems.list.empty()) checks.CheckDerived(s, &problems.list);
  return problems.list;
}

std::string DescribeProblems(const Scenario& s, const std::vector<ScenarioProblem>& problems) {
  std::string text;
  for (const ScenarioProblem& p : problems) {
    if (!text.empty()) text += "; ";
    if (p.key.empty()) {
      text += p.message;
    } else {
      text += fmt::format("{}{}{}: {}", s.path, s.path.empty() ? "" : ": ", p.key, p.message);
    }
  }
  return text;
}

void CheckScenario(const Scenario& scenario, EngineChecks& checks) {
  const std::vector<ScenarioProblem> problems = Validate(scenario, checks);
  if (!problems.empty()) throw InputError(DescribeProblems(scenario, problems));
}

}  // namespace stagecraft::sim
