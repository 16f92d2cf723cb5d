// Scenario loading: read the YAML file, pull in a topology file, apply --set overrides to the
// tree, read every block value by value, state the precision once, then Validate how the
// blocks fit, each problem located at its key in the file (or the --set it came from).
#include "stagecraft/sim/scenario.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <iterator>
#include <optional>
#include <utility>

#include "scenario_parse.h"
#include "stagecraft/base/error.h"
#include "stagecraft/schedules/generators.h"
#include "stagecraft/schedules/ir.h"
#include "stagecraft/sim/limits.h"
#include "stagecraft/sim/validate.h"
#include "validate_detail.h"
#include "yaml_util.h"

namespace stagecraft::sim {
namespace {

using stagecraft::InputError;
using yaml::Map;
using yaml::Origin;
using yaml::Override;
using yaml::Value;

std::vector<std::string> SplitPath(const std::string& path) {
  std::vector<std::string> parts;
  size_t start = 0;
  for (size_t dot = path.find('.'); dot != std::string::npos; dot = path.find('.', start)) {
    parts.push_back(path.substr(start, dot - start));
    start = dot + 1;
  }
  parts.push_back(path.substr(start));
  return parts;
}

// The entry `key` of a map or list node (a reference into the tree), creating an empty map
// under a missing map key. `walked` is the path so far, for errors.
YAML::Node Descend(YAML::Node node, const std::string& key, const std::string& walked, const Override& ov) {
  if (node.IsNull()) node = YAML::Node(YAML::NodeType::Map);
  if (node.IsMap()) {
    for (auto it = node.begin(); it != node.end(); ++it) {
      if (it->first.IsScalar() && it->first.Scalar() == key) return it->second;
    }
    node[key] = YAML::Node(YAML::NodeType::Map);
    return node[key];
  }
  if (node.IsSequence()) {
    size_t index = 0;
    const auto [end, ec] = std::from_chars(key.data(), key.data() + key.size(), index);
    if (node.size() == 0) throw InputError(fmt::format("--set {}: '{}' is an empty list", ov.text, walked));
    if (ec != std::errc() || end != key.data() + key.size() || index >= node.size()) {
      throw InputError(fmt::format("--set {}: '{}' is a list of {} entries; expected an index 0..{}, got '{}'", ov.text,
                                   walked, node.size(), node.size() - 1, key));
    }
    return node[index];
  }
  throw InputError(fmt::format("--set {}: '{}' is a single value, not a map", ov.text, walked));
}

// Replaces `parent[key]` (`name`, which names `file`) by the parsed file; returns the file's
// path. A file that cannot be read fails at the key; an error inside it names the file.
std::string IncludeFile(YAML::Node parent, const std::string& key, const Value& name, const std::string& file,
                        std::string_view what) {
  std::string text;
  try {
    text = yaml::ReadFile(file, what);
  } catch (const InputError& e) {
    name.Fail(e.what());
  }
  parent[key] = yaml::LoadText(text, file);
  return file;
}

// A `topology: FILE`, relative to the file that names it.
std::string IncludeFile(YAML::Node parent, const std::string& key, const Value& name) {
  return IncludeFile(parent, key, name, name.FilePath(), "a topology file");
}

// Applies one override to the tree. A whole new `topology: FILE` is included at once, relative
// to the current directory, and recorded in `topology_file`.
void ApplyOverride(YAML::Node root, const std::vector<Override>& overrides, int index,
                   std::optional<std::string>* topology_file) {
  const Override& ov = overrides[index];
  const std::vector<std::string> parts = SplitPath(ov.path);
  YAML::Node node = root;
  std::string walked;
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    node.reset(Descend(node, parts[i], walked, ov));
    walked += (walked.empty() ? "" : ".") + parts[i];
  }
  const std::string& last = parts.back();
  if (node.IsSequence()) {
    Descend(node, last, walked, ov) = ov.value;
  } else if (node.IsMap() || node.IsNull()) {
    node[last] = ov.value;
  } else {
    throw InputError(fmt::format("--set {}: '{}' is a single value, not a map", ov.text, walked));
  }
  if (ov.path == "topology") {
    topology_file->reset();
    if (ov.value.IsScalar()) {
      const Value name(ov.value, "topology", Origin{"", "", index, true}, &overrides);
      *topology_file = IncludeFile(root, "topology", name);
    }
  }
}

// Replaces a `topology.device: NAME` in the tree by its library file's fields, so that --set
// can reach into them (topology.device.memory_bandwidth=...); `name` is located at `origin`.
void IncludeDevice(YAML::Node root, const Origin& origin, const std::vector<Override>* overrides,
                   std::optional<detail::DeviceInclude>* device) {
  if (!root.IsMap() || !root["topology"] || !root["topology"].IsMap()) return;
  YAML::Node topology = root["topology"];
  if (!topology["device"] || !topology["device"].IsScalar()) return;
  const Value name(topology["device"], "topology.device", origin, overrides);
  const std::string library_name = name.String();  // before the node is replaced by the file's
  const std::string file = IncludeFile(topology, "device", name, detail::DeviceFile(name), "a device file");
  *device = detail::DeviceInclude{library_name, file};
}

bool IsScheduleFile(std::string_view name) { return name.size() > 4 && name.substr(name.size() - 4) == ".csv"; }

std::vector<std::string> ParseSchedules(const Value& value, std::map<std::string, std::string>* files) {
  std::vector<Value> names;
  if (value.IsSequence()) {
    names = value.Elements();
    if (names.empty())
      value.Fail(
          fmt::format("expected a schedule name, a list of them or all (known: {})", schedules::GeneratorNames()));
  } else {
    names.push_back(value);
  }
  std::vector<std::string> schedules;
  for (const Value& name : names) {
    const std::string text = name.String();
    if (text == "all" && names.size() == 1) return {"all"};
    if (text == kSearchedSchedule) {
      // The search's order, made from the scenario when its schedules are built (harness).
    } else if (IsScheduleFile(text)) {
      (*files)[text] = name.ReadableFilePath();
    } else if (schedules::FindGenerator(text) == nullptr) {
      name.Fail(detail::UnknownSchedule(text, names.size() == 1));
    }
    for (const std::string& earlier : schedules) {
      if (earlier == text) name.Fail(fmt::format("schedule '{}' is listed twice", text));
    }
    schedules.push_back(text);
  }
  return schedules;
}

// pipeline.recompute: none | selective | full, or false (none) / true (full) as before.
Recompute ParseRecompute(const Value& v) {
  if (v.IsScalar() && (v.node().Scalar() == "true" || v.node().Scalar() == "false")) {
    return v.Bool() ? Recompute::kFull : Recompute::kNone;
  }
  return v.Enum(kRecomputeNames);
}

// pipeline.placement: the three axes, each once, innermost first.
std::vector<Axis> ParsePlacement(const Value& v) {
  std::vector<Axis> axes;
  const std::vector<Value> items = v.Elements();
  for (const Value& item : items) {
    const Axis axis = item.Enum(kAxisNames);
    if (std::find(axes.begin(), axes.end(), axis) != axes.end()) item.Fail(fmt::format("'{}' is listed twice", Name(axis)));
    axes.push_back(axis);
  }
  if (axes.size() != 3) v.Fail(fmt::format("expected the three axes tensor, data and pipeline, innermost first; got {}", axes.size()));
  return axes;
}

PipelineSpec ParsePipeline(const Value& value) {
  const Map m(value, {"schedule", "ranks", "chunks", "microbatches", "microbatch_size", "steps", "recompute",
                      "vertical_sync", "partition", "p2p", "p2p_buffers", "data_parallel", "tensor_parallel",
                      "sequence_parallel", "tensor_parallel_overlap", "zero", "placement", "memory_limit",
                      "search_evaluations", "zb_refine_nodes", "ranks_per_device"});
  PipelineSpec p;
  p.schedules = ParseSchedules(m.Get("schedule"), &p.schedule_files);
  p.ranks = static_cast<int>(m.Get("ranks").Int(1, kMaxRanks));
  if (const auto v = m.Find("chunks")) p.chunks = static_cast<int>(v->Int(1, kMaxChunks));
  p.microbatches = static_cast<int>(m.Get("microbatches").Int(1, kMaxMicrobatches));
  if (const auto v = m.Find("microbatch_size")) p.microbatch_size = static_cast<int>(v->Int(1, kMaxMicrobatchSize));
  if (const auto v = m.Find("steps")) p.steps = static_cast<int>(v->Int(1, kMaxSteps));
  if (const auto v = m.Find("recompute")) p.recompute = ParseRecompute(*v);
  if (const auto v = m.Find("vertical_sync")) p.vertical_sync = v->Bool();
  if (const auto v = m.Find("partition")) {
    if (v->IsSequence()) {
      for (const Value& item : v->Elements()) p.partition_layers.push_back(static_cast<int>(item.Int(1, kMaxLayers)));
      if (p.partition_layers.empty()) v->Fail("expected even, balanced or the layers of each stage, [n0, n1, ...]");
      p.partition = Partition::kGiven;
    } else {
      p.partition = v->Enum(kPartitionChoices);
    }
  }
  if (const auto v = m.Find("p2p")) schedules::ParseP2p(v->Choice({"ahead", "lockstep"}), &p.p2p);
  if (const auto v = m.Find("p2p_buffers")) p.p2p_buffers = static_cast<int>(v->Int(1, kMaxMicrobatches));
  if (const auto v = m.Find("data_parallel")) p.data_parallel = static_cast<int>(v->Int(1, kMaxDevices));
  if (const auto v = m.Find("tensor_parallel")) p.tensor_parallel = static_cast<int>(v->Int(1, kMaxTensorParallel));
  if (const auto v = m.Find("ranks_per_device")) p.ranks_per_device = static_cast<int>(v->Int(1, kMaxRanks));
  if (const auto v = m.Find("sequence_parallel")) p.sequence_parallel = v->Bool();
  if (const auto v = m.Find("tensor_parallel_overlap")) p.tensor_parallel_overlap = v->Bool();
  if (const auto v = m.Find("zero")) p.zero = static_cast<int>(v->Int(0, 1));
  if (const auto v = m.Find("placement")) p.placement = ParsePlacement(*v);
  if (const auto v = m.Find("memory_limit")) p.memory_limit_bytes = v->Bytes(1);
  if (const auto v = m.Find("search_evaluations")) p.search_evaluations = v->Int(1, kMaxSearchEvaluations);
  if (const auto v = m.Find("zb_refine_nodes")) p.zb_refine_nodes = v->Int(0, kMaxZbRefineNodes);
  return p;
}

TrainingSpec ParseTraining(const Value& value) {
  const Map m(value, {"optimizer", "lr", "momentum", "seed", "dtype", "loss_scale", "data"});
  TrainingSpec t;
  t.optimizer = m.Get("optimizer").Enum(kOptimizerNames);
  t.lr = m.Get("lr").Double(0.0, HUGE_VAL);  // any finite rate: the simulator does no arithmetic on it
  if (const auto v = m.Find("momentum")) {
    t.momentum = v->Double(-1.0, 1.0);
    if (t.momentum < 0 || t.momentum >= 1) v->Fail(fmt::format("expected a number in [0, 1), got {}", v->Describe()));
  }
  if (const auto v = m.Find("seed")) t.seed = v->Int(0, INT64_MAX);
  if (const auto v = m.Find("loss_scale")) {
    // A power of two scales every gradient exactly; anything else would round them.
    t.loss_scale = v->Double(0.0, 16777216.0);
    int exponent = 0;
    if (t.loss_scale < 1.0 || std::frexp(t.loss_scale, &exponent) != 0.5) {
      v->Fail(fmt::format("expected a power of two (1, 2, 4, ... 16777216), got {}", v->Describe()));
    }
  }
  if (const auto v = m.Find("data")) t.data_path = v->ReadableFilePath();
  return t;
}

// The run's one precision (scenario.h): training.dtype, else model.transformer.dtype, else fp32
// with a training block and bf16 without; both stated, they must name the same stored type.
Dtype ResolvePrecision(const Map& top, bool has_training) {
  std::optional<Value> training, transformer;
  if (const auto block = top.Find("training"); block && block->node()["dtype"]) training = block->At("dtype");
  if (const auto model = top.Find("model"); model && model->node()["transformer"]) {
    if (const Value t = model->At("transformer"); t.node()["dtype"]) transformer = t.At("dtype");
  }
  const std::optional<Dtype> stated = training ? std::optional(training->Enum(kDtypeNames)) : std::nullopt;
  if (!transformer) return stated.value_or(has_training ? Dtype::kFp32 : Dtype::kBf16);
  const Dtype older = transformer->Enum(kDtypeNames);
  if (!stated) return older;
  if (older != *stated && !(DtypeBytes(older) == 4 && DtypeBytes(*stated) == 4)) {
    transformer->Fail(fmt::format("{} disagrees with training.dtype {}; the precision is stated once, in "
                                  "training.dtype",
                                  Name(older), Name(*stated)));
  }
  return *stated;
}

// The value a problem's key names; the topology's keys in the topology's own origin (its file).
Value Locate(const Value& root, const Value& topology, std::string_view key) {
  constexpr std::string_view kTopology = "topology";
  if (!key.starts_with(kTopology)) return root.At(key);
  if (key.size() == kTopology.size()) return topology;
  if (key[kTopology.size()] != '.') return root.At(key);
  return topology.At(key.substr(kTopology.size() + 1));
}

// Validate's problems, each located at its key, as one InputError.
void ThrowProblems(const Scenario& s, const Value& root, const Value& topology) {
  const std::vector<ScenarioProblem> problems = Validate(s);
  if (problems.empty()) return;
  std::string text;
  for (const ScenarioProblem& p : problems) {
    if (!text.empty()) text += "; ";
    text += p.key.empty() ? p.message : Locate(root, topology, p.key).Located(p.message);
  }
  throw InputError(text);
}

}  // namespace

Scenario LoadScenario(const std::string& path, const std::vector<std::string>& overrides) {
  return LoadScenarioFromText(yaml::ReadFile(path, "a scenario file"), path, overrides);
}

namespace {

// The scenario's YAML tree as the reader sees it: the file, its topology file pulled in, a
// library device's fields put in place, and the overrides applied.
struct ScenarioTree {
  YAML::Node root;
  std::vector<Override> overrides;
  std::optional<std::string> topology_file;
  std::optional<detail::DeviceInclude> device;
};

ScenarioTree BuildTree(std::string_view file_text, const std::string& path,
                       const std::vector<std::string>& override_texts) {
  ScenarioTree tree;
  YAML::Node& root = tree.root;
  root = yaml::LoadText(file_text, path);
  std::vector<Override>& overrides = tree.overrides;
  for (const std::string& text : override_texts) overrides.push_back(yaml::ParseOverride(text));

  const Origin file_origin{path, yaml::DirOf(path), -1, false};
  // `topology: FILE` is read before the overrides so that --set can reach into it, unless the
  // first override that touches the topology replaces it whole.
  bool replaced_first = false;
  for (const Override& ov : overrides) {
    if (ov.path == "topology" || ov.path.rfind("topology.", 0) == 0) {
      replaced_first = ov.path == "topology";
      break;
    }
  }
  std::optional<std::string>& topology_file = tree.topology_file;
  std::optional<detail::DeviceInclude>& device = tree.device;
  if (root.IsMap()) {
    const Value top(root, "", file_origin, nullptr);
    for (auto it = root.begin(); it != root.end() && !replaced_first; ++it) {
      if (it->first.IsScalar() && it->first.Scalar() == "topology" && it->second.IsScalar()) {
        topology_file = IncludeFile(root, "topology", top.Child("topology", it->second));
        break;
      }
    }
    // A library device named where the overrides can reach into it: in the scenario or its
    // topology file, unless the first override that touches the device replaces it whole.
    bool device_replaced_first = replaced_first;
    for (const Override& ov : overrides) {
      if (ov.path == "topology" || ov.path == "topology.device" || ov.path.rfind("topology.device.", 0) == 0) {
        device_replaced_first = ov.path != "topology.device" ? ov.path == "topology" : ov.value.IsScalar();
        break;
      }
    }
    if (!device_replaced_first) {
      IncludeDevice(root, topology_file ? Origin{*topology_file, yaml::DirOf(*topology_file), -1, false} : file_origin,
                    nullptr, &device);
    }
    for (size_t i = 0; i < overrides.size(); ++i) {
      ApplyOverride(root, overrides, static_cast<int>(i), &topology_file);
      const std::string& key = overrides[i].path;
      if (key != "topology" && key != "topology.device") continue;
      // A device or topology put in place whole is no longer the library file's; a device it
      // names is read now, so that the overrides after it reach into its fields.
      device.reset();
      const Origin origin = key == "topology.device" || !topology_file
                                ? Origin{"", "", static_cast<int>(i), true}
                                : Origin{*topology_file, yaml::DirOf(*topology_file), static_cast<int>(i), false};
      IncludeDevice(root, origin, &overrides, &device);
    }
  }
  return tree;
}

// The keys that name files, resolved against `dir` ("" = the current directory) when relative.
constexpr std::string_view kFileKeys[] = {"model.profile", "training.data"};

std::string Absolute(const std::string& name, const std::string& dir) {
  std::filesystem::path file(name);
  if (file.is_relative() && !dir.empty()) file = std::filesystem::path(dir) / file;
  return std::filesystem::absolute(file).lexically_normal().string();
}

// Makes a file name at `key` of the tree (a schedule list's .csv entries included) absolute.
void MakeAbsolute(YAML::Node root, std::string_view key, const std::string& dir) {
  if (!root.IsMap()) return;
  const size_t dot = key.find('.');
  YAML::Node block = root[std::string(key.substr(0, dot))];
  if (!block.IsMap()) return;
  YAML::Node value = block[std::string(key.substr(dot + 1))];
  if (value.IsScalar() && !value.Scalar().empty()) {
    if (key != "pipeline.schedule" || IsScheduleFile(value.Scalar())) value = Absolute(value.Scalar(), dir);
  } else if (value.IsSequence()) {
    for (YAML::Node entry : value) {
      if (entry.IsScalar() && IsScheduleFile(entry.Scalar())) entry = Absolute(entry.Scalar(), dir);
    }
  }
}

}  // namespace

std::string ScenarioText(const std::string& path, const std::vector<std::string>& overrides) {
  const std::string text = yaml::ReadFile(path, "a scenario file");
  // The file's names are relative to its directory, an override's to the current one: each is
  // made absolute where it stands, before the tree is put together.
  YAML::Node file = yaml::LoadText(text, path);
  for (const std::string_view key : kFileKeys) MakeAbsolute(file, key, yaml::DirOf(path));
  MakeAbsolute(file, "pipeline.schedule", yaml::DirOf(path));
  if (file.IsMap() && file["topology"].IsScalar()) file["topology"] = Absolute(file["topology"].Scalar(), yaml::DirOf(path));
  std::vector<std::string> resolved;
  for (const std::string& o : overrides) {
    Override ov = yaml::ParseOverride(o);
    const bool names_file = std::find(std::begin(kFileKeys), std::end(kFileKeys), ov.path) != std::end(kFileKeys) ||
                            ov.path == "pipeline.schedule";
    if (!names_file) {
      resolved.push_back(o);
      continue;
    }
    YAML::Node holder(YAML::NodeType::Map);
    const size_t dot = ov.path.find('.');
    holder[ov.path.substr(0, dot)][ov.path.substr(dot + 1)] = ov.value;
    MakeAbsolute(holder, ov.path, "");
    YAML::Emitter value;
    value << YAML::Flow << holder[ov.path.substr(0, dot)][ov.path.substr(dot + 1)];
    resolved.push_back(ov.path + "=" + value.c_str());
  }
  YAML::Emitter emitted;
  emitted << file;
  const ScenarioTree tree = BuildTree(emitted.c_str(), path, resolved);
  YAML::Emitter out;
  out << tree.root;
  return std::string(out.c_str()) + "\n";
}

namespace {

// The scenario with the layout a planner replaces set to the simplest one (scenario.h,
// LoadScenarioForNewLayout): what the rest of it is validated against.
Scenario WithPlainLayout(Scenario s) {
  PipelineSpec& p = s.pipeline;
  p.schedules = {"1f1b"};
  p.schedule_files.clear();
  if (!s.model.costs) p.ranks = 1;  // explicit costs are stated per rank of the layout written
  p.chunks = 1;
  p.microbatches = 1;
  p.microbatch_size = s.model.profile ? s.model.profile->microbatch_size : 1;
  p.data_parallel = 1;
  p.tensor_parallel = 1;
  p.sequence_parallel = false;
  p.zero = 0;
  p.recompute = Recompute::kNone;
  p.partition = Partition::kEven;
  p.partition_layers.clear();
  return s;
}

Scenario Load(std::string_view file_text, const std::string& path, const std::vector<std::string>& override_texts,
              bool new_layout) {
  const ScenarioTree tree = BuildTree(file_text, path, override_texts);
  const YAML::Node& root = tree.root;
  const std::vector<Override>& overrides = tree.overrides;
  const std::optional<std::string>& topology_file = tree.topology_file;
  const std::optional<detail::DeviceInclude>& device = tree.device;
  const Origin file_origin{path, yaml::DirOf(path), -1, false};
  const Value root_value(root, "", file_origin, &overrides);
  const Map top(root_value, {"name", "topology", "model", "pipeline", "training"});
  Scenario s;
  s.path = path;
  s.overrides = override_texts;
  s.name = top.Get("name").String();
  s.pipeline = ParsePipeline(top.Get("pipeline"));
  Value topology = top.Get("topology");
  if (topology_file) {
    Origin origin = topology.origin();
    origin.file = *topology_file;
    origin.dir = yaml::DirOf(*topology_file);
    origin.from_override = false;
    topology = Value(topology.node(), "topology", origin, &overrides);
  }
  s.topology = detail::ParseTopology(topology, device ? &*device : nullptr);
  s.model = detail::ParseModel(top.Get("model"), s.pipeline.ranks);
  if (const auto training = top.Find("training")) {
    s.training = ParseTraining(*training);
    s.has_training = true;
  }
  s.training.dtype = ResolvePrecision(top, s.has_training);
  detail::ResolvePeak(topology.At("device"), s.training.dtype, &s.topology.device);
  ThrowProblems(new_layout ? WithPlainLayout(s) : s, root_value, topology);
  return s;
}

}  // namespace

Scenario LoadScenarioFromText(std::string_view file_text, const std::string& path,
                              const std::vector<std::string>& overrides) {
  return Load(file_text, path, overrides, false);
}

Scenario LoadScenarioForNewLayout(const std::string& path, const std::vector<std::string>& overrides) {
  return LoadScenarioForNewLayoutFromText(yaml::ReadFile(path, "a scenario file"), path, overrides);
}

Scenario LoadScenarioForNewLayoutFromText(std::string_view file_text, const std::string& path,
                                         const std::vector<std::string>& overrides) {
  return Load(file_text, path, overrides, true);
}

int PipelineSpec::DeviceOf(int rank, int replica, int tensor) const {
  int64_t device = 0, stride = 1;
  for (const Axis axis : placement) {
    const auto [index, size] = axis == Axis::kTensor ? std::pair{tensor, tensor_parallel}
                               : axis == Axis::kData ? std::pair{replica, data_parallel}
                                                     : std::pair{rank / ranks_per_device, pipeline_devices()};
    device += index * stride;
    stride *= size;
  }
  return static_cast<int>(device);
}

std::vector<int> PipelineSpec::RankDevices() const {
  std::vector<int> devices;
  if (world() == ranks && ranks_per_device == 1) return devices;
  for (int r = 0; r < ranks; ++r) devices.push_back(DeviceOf(r));
  return devices;
}

std::vector<std::vector<int>> PipelineSpec::ReplicaDevices() const {
  std::vector<std::vector<int>> devices;
  if (data_parallel <= 1) return devices;
  devices.resize(static_cast<size_t>(ranks));
  for (int r = 0; r < ranks; ++r) {
    for (int i = 0; i < data_parallel; ++i) devices[r].push_back(DeviceOf(r, i));
  }
  return devices;
}

schedules::GeneratorParams GeneratorParamsFor(const PipelineSpec& p, const schedules::GeneratorInfo& info) {
  const bool all = p.runs_all();
  schedules::GeneratorParams params;
  params.ranks = p.ranks;
  params.microbatches = p.microbatches;
  params.steps = p.steps;
  params.recompute = p.full_recompute();
  params.data_parallel = p.data_parallel;
  params.chunks = info.interleaved ? schedules::ChunksFor(info, p.chunks) : 1;
  params.vertical_sync = p.vertical_sync && (!all || info.weights == schedules::WeightPolicy::kStash);
  params.zb_refine_nodes = p.zb_refine_nodes;
  return params;
}

}  // namespace stagecraft::sim
