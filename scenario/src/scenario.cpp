// Scenario loading: the YAML tree (scenario_tree.cpp) read block by block, value by value, the
// precision stated once, then Validate how the blocks fit (with the engine's checks), each
// problem located at its key in the file (or the --set it came from).
#include "stagecraft/scenario/scenario.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>

#include "scenario_parse.h"
#include "stagecraft/base/error.h"
#include "stagecraft/schedules/generators.h"
#include "stagecraft/schedules/ir.h"
#include "stagecraft/scenario/limits.h"
#include "stagecraft/scenario/validate.h"
#include "validate_detail.h"
#include "yaml_util.h"

namespace stagecraft::sim {
namespace {

using stagecraft::InputError;
using yaml::Map;
using yaml::Origin;
using yaml::Override;
using yaml::Value;
using detail::IsScheduleFile;

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

// pipeline.offload: {activations: FRACTION | auto, weights: none | spill, optimizer: device | host,
// double_buffer: BOOL}.
OffloadSpec ParseOffload(const Value& value) {
  const Map m(value, {"activations", "weights", "optimizer", "double_buffer"});
  OffloadSpec o;
  if (const auto v = m.Find("activations")) {
    if (v->IsScalar() && v->node().Scalar() == "auto") {
      o.activations_auto = true;
    } else {
      o.activations = v->DoubleIn(0, 1, "auto or a fraction");
    }
  }
  if (const auto v = m.Find("weights")) o.weights = v->Enum(kWeightsOffloadChoices);
  if (const auto v = m.Find("optimizer")) o.optimizer = v->Enum(kOptimizerPlaceChoices);
  if (const auto v = m.Find("double_buffer")) o.double_buffer = v->Bool();
  return o;
}

PipelineSpec ParsePipeline(const Value& value) {
  const Map m(value, {"schedule", "ranks", "chunks", "microbatches", "microbatch_size", "steps", "recompute",
                      "vertical_sync", "partition", "p2p", "p2p_buffers", "data_parallel", "context_parallel", "context_parallel_comm", "tensor_parallel",
                      "sequence_parallel", "tensor_parallel_overlap", "grad_reduce_overlap", "zero", "placement",
                      "memory_limit", "search_evaluations", "zb_refine_nodes", "ranks_per_device", "offload",
                      "task_scheduler", "expert_parallel", "a2a_overlap", "moe_dispatcher", "param_gather_overlap",
                      "recompute_modules"});
  PipelineSpec p;
  p.schedules = ParseSchedules(m.Get("schedule"), &p.schedule_files);
  p.ranks = static_cast<int>(m.Get("ranks").Int(1, kMaxRanks));
  if (const auto v = m.Find("chunks")) p.chunks = static_cast<int>(v->Int(1, kMaxChunks));
  p.microbatches = static_cast<int>(m.Get("microbatches").Int(1, kMaxMicrobatches));
  if (const auto v = m.Find("microbatch_size")) p.microbatch_size = static_cast<int>(v->Int(1, kMaxMicrobatchSize));
  if (const auto v = m.Find("steps")) p.steps = static_cast<int>(v->Int(1, kMaxSteps));
  if (const auto v = m.Find("recompute")) p.recompute = detail::ParseRecompute(*v);
  if (const auto v = m.Find("recompute_modules")) p.recompute_modules = detail::ParseRecomputeModules(*v);
  if (const auto v = m.Find("vertical_sync")) p.vertical_sync = v->Bool();
  if (const auto v = m.Find("partition")) {
    if (v->IsSequence()) {
      for (const Value& item : v->Elements()) p.partition_layers.push_back(static_cast<int>(item.Int(0, kMaxLayers)));
      if (p.partition_layers.empty()) v->Fail("expected even, balanced or the layers of each stage, [n0, n1, ...]");
      p.partition = Partition::kGiven;
    } else {
      p.partition = v->Enum(kPartitionChoices);
    }
  }
  if (const auto v = m.Find("p2p")) schedules::ParseP2p(v->Choice({"ahead", "lockstep"}), &p.p2p);
  if (const auto v = m.Find("p2p_buffers")) p.p2p_buffers = static_cast<int>(v->Int(1, kMaxMicrobatches));
  if (const auto v = m.Find("data_parallel")) p.data_parallel = static_cast<int>(v->Int(1, kMaxDevices));
  if (const auto v = m.Find("context_parallel")) p.context_parallel = static_cast<int>(v->Int(1, kMaxTensorParallel));
  if (const auto v = m.Find("context_parallel_comm")) {
    p.context_all_gather = v->Choice({"p2p", "all_gather"}) == "all_gather";
  }
  if (const auto v = m.Find("tensor_parallel")) p.tensor_parallel = static_cast<int>(v->Int(1, kMaxTensorParallel));
  if (const auto v = m.Find("ranks_per_device")) p.ranks_per_device = static_cast<int>(v->Int(1, kMaxRanks));
  if (const auto v = m.Find("sequence_parallel")) p.sequence_parallel = v->Bool();
  if (const auto v = m.Find("tensor_parallel_overlap")) p.tensor_parallel_overlap = v->Bool();
  if (const auto v = m.Find("zero")) p.zero = static_cast<int>(v->Int(0, 3));
  if (const auto v = m.Find("placement")) p.placement = ParsePlacement(*v);
  if (const auto v = m.Find("memory_limit")) p.memory_limit_bytes = v->Bytes(1);
  if (const auto v = m.Find("search_evaluations")) p.search_evaluations = v->Int(1, kMaxSearchEvaluations);
  if (const auto v = m.Find("zb_refine_nodes")) p.zb_refine_nodes = v->Int(0, kMaxZbRefineNodes);
  if (const auto v = m.Find("offload")) p.offload = ParseOffload(*v);
  if (const auto v = m.Find("expert_parallel")) p.expert_parallel = static_cast<int>(v->Int(1, kMaxExperts));
  if (const auto v = m.Find("grad_reduce_overlap")) p.grad_reduce_overlap = v->Bool();
  if (const auto v = m.Find("param_gather_overlap")) p.param_gather_overlap = v->Bool();
  if (const auto v = m.Find("moe_dispatcher")) p.deepep = v->Choice({"alltoall", "deepep"}) == "deepep";
  if (const auto v = m.Find("a2a_overlap")) {
    const Map o(*v, {"enabled", "sm_share"});
    if (const auto e = o.Find("enabled")) p.a2a_overlap = e->Bool();
    if (const auto share = o.Find("sm_share")) p.a2a_sm_share = share->DoubleIn(0.0, 0.9, "a share of the compute units");
  }
  if (const auto v = m.Find("task_scheduler")) p.task_scheduler = v->Enum(kTaskSchedulerNames);
  return p;
}

LrScheduleSpec ParseLrSchedule(const Value& value) {
  const Map m(value, {"warmup_steps", "decay", "min_lr"});
  LrScheduleSpec l;
  // A warm-up of no steps is none: leave the key out rather than state 0.
  if (const auto v = m.Find("warmup_steps")) l.warmup_steps = v->Int(1, kMaxSteps);
  if (const auto v = m.Find("decay")) l.decay = v->Enum(kLrDecayNames);
  if (const auto v = m.Find("min_lr")) l.min_lr = v->DoubleIn(0.0, HUGE_VAL, "a rate");
  return l;
}

PipeMareSpec ParsePipeMare(const Value& value) {
  const Map m(value, {"lr_reschedule_steps", "correction", "correction_decay"});
  PipeMareSpec p;
  if (const auto v = m.Find("lr_reschedule_steps")) p.lr_reschedule_steps = v->Int(0, kMaxSteps);
  if (const auto v = m.Find("correction")) p.correction = v->Bool();
  if (const auto v = m.Find("correction_decay")) {
    p.correction_decay = v->DoubleIn(0.0, 1.0, "a decay");
    if (p.correction_decay >= 1.0) v->Fail("expected a decay in [0, 1) (1 would never move the velocity)");
  }
  return p;
}

TrainingSpec ParseTraining(const Value& value) {
  const Map m(value, {"optimizer", "lr", "momentum", "seed", "dtype", "loss_scale", "data", "lr_schedule", "pipemare",
                      "target_loss", "loss_window", "fp8", "fp8_scaling", "fp8_dispatch", "grad_dtype"});
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
  if (const auto v = m.Find("lr_schedule")) t.lr_schedule = ParseLrSchedule(*v);
  if (const auto v = m.Find("pipemare")) t.pipemare = ParsePipeMare(*v);
  if (const auto v = m.Find("target_loss")) t.target_loss = v->Double(0.0, HUGE_VAL);
  if (const auto v = m.Find("loss_window")) t.loss_window = static_cast<int>(v->Int(1, kMaxSteps));
  if (const auto v = m.Find("fp8")) t.fp8 = v->Bool();
  if (const auto v = m.Find("fp8_scaling")) {
    t.fp8_scaling = v->Enum(kFp8ScalingNames);
    if (!t.fp8) v->Fail("applies to training.fp8: true (the FP8 casts' scaling); state that too, or leave this out");
  }
  if (const auto v = m.Find("grad_dtype")) {
    t.grad_dtype = v->Enum(kDtypeNames);
    if (t.grad_dtype == Dtype::kFp8 || t.grad_dtype == Dtype::kTf32) v->Fail("expected fp32, bf16 or fp16");
  }
  if (const auto v = m.Find("fp8_dispatch")) {
    t.fp8_dispatch = v->Bool();
    if (t.fp8_dispatch && !t.fp8) {
      v->Fail("applies to training.fp8: true (the experts' FP8 input, cast before the dispatch); state that too, or "
              "leave this out");
    }
  }
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
  // fp8 is a GEMM precision (training.fp8), not one a run stores its tensors in.
  const auto stored = [](const Value& v) {
    const Dtype dtype = v.Enum(kDtypeNames);
    if (dtype == Dtype::kFp8) {
      v.Fail("fp8 stores no tensors: state the 16-bit precision (bf16) here and training.fp8: true to run the "
             "linear layers' GEMMs in FP8");
    }
    return dtype;
  };
  const std::optional<Dtype> stated = training ? std::optional(stored(*training)) : std::nullopt;
  if (!transformer) return stated.value_or(has_training ? Dtype::kFp32 : Dtype::kBf16);
  const Dtype older = stored(*transformer);
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
void ThrowProblems(const Scenario& s, const Value& root, const Value& topology, EngineChecks& checks) {
  const std::vector<ScenarioProblem> problems = Validate(s, checks);
  if (problems.empty()) return;
  std::string text;
  for (const ScenarioProblem& p : problems) {
    if (!text.empty()) text += "; ";
    text += p.key.empty() ? p.message : Locate(root, topology, p.key).Located(p.message);
  }
  throw InputError(text);
}

// `s` running `task` alone (TaskScenario).
Scenario Alone(const Scenario& s, const TaskSpec& task) {
  Scenario alone = s;
  alone.name = fmt::format("{}/{}", s.name, task.name);
  alone.model = task.model;
  alone.pipeline = task.pipeline;
  alone.tasks.clear();
  return alone;
}

// The model a task names: an entry of the scenario's `models:` map, or its own model block.
ModelSpec ParseTaskModel(const Value& value, const std::optional<Value>& models, int ranks, std::string* name) {
  if (!value.IsScalar()) return detail::ParseModel(value, ranks);
  *name = value.String();
  std::vector<std::string> known;
  if (models) {
    for (const auto& entry : models->node()) {
      if (!entry.first.IsScalar()) models->Fail("expected model names as keys, each naming a model block");
      const std::string key = entry.first.Scalar();
      if (key == *name) return detail::ParseModel(models->Child(key, entry.second), ranks);
      known.push_back(key);
    }
  }
  value.Fail(known.empty() ? fmt::format("unknown model '{}': the scenario has no models: block to name it from", *name)
                           : fmt::format("unknown model '{}' (models: {})", *name, fmt::join(known, ", ")));
}

// tasks: [{name, model, steps, pipeline}, ...] (DESIGN.md §10): each task's pipeline is the
// scenario's with the keys it states replaced, and the task is validated as a scenario of its own,
// each problem located at the task.
std::vector<TaskSpec> ParseTasks(const Value& list, const Map& top, const Scenario& s, EngineChecks& checks) {
  const std::vector<Value> items = list.Elements();
  if (items.empty()) list.Fail("expected a list of tasks, each {name, model, steps, pipeline}");
  const std::optional<Value> models = top.Find("models");
  if (models && !models->IsMap()) models->Fail("expected a map from model names to model blocks");
  const Value base = top.Get("pipeline");
  std::vector<TaskSpec> tasks;
  for (const Value& item : items) {
    const Map m(item, {"name", "model", "steps", "pipeline"});
    TaskSpec t;
    const Value name = m.Get("name");
    t.name = name.String();
    for (const TaskSpec& earlier : tasks) {
      if (earlier.name == t.name) name.Fail(fmt::format("task '{}' is listed twice", t.name));
    }
    YAML::Node merged(YAML::NodeType::Map);
    for (const auto& entry : base.node()) merged[entry.first.Scalar()] = entry.second;  // checked by ParsePipeline
    if (const auto own = m.Find("pipeline")) {
      if (!own->IsMap()) own->Fail("expected a map of pipeline keys (the scenario's pipeline gives the others)");
      for (const auto& entry : own->node()) {
        if (!entry.first.IsScalar()) own->Fail("expected pipeline keys (the scenario's pipeline gives the others)");
        merged[entry.first.Scalar()] = entry.second;
      }
    }
    const Value pipeline = item.Child("pipeline", merged);
    t.pipeline = ParsePipeline(pipeline);
    if (const auto steps = m.Find("steps")) t.pipeline.steps = static_cast<int>(steps->Int(1, kMaxSteps));
    if (t.pipeline.runs_all() || t.pipeline.schedules.size() != 1) {
      pipeline.At("schedule").Fail(fmt::format("a task runs one schedule; got {}", t.pipeline.runs_all() ? "all" :
                                               fmt::format("{}", t.pipeline.schedules.size())));
    }
    if (t.pipeline.task_scheduler != s.pipeline.task_scheduler) {
      pipeline.At("task_scheduler").Fail("the workload has one task scheduler: state it in the scenario's pipeline");
    }
    const auto model = m.Find("model");
    t.model = model ? ParseTaskModel(*model, models, t.pipeline.ranks, &t.model_name) : s.model;
    const std::vector<ScenarioProblem> problems = Validate(Alone(s, t), checks);
    tasks.push_back(std::move(t));
    if (!problems.empty()) {
      const ScenarioProblem& p = problems.front();
      const Value at = p.key.starts_with("pipeline.") ? pipeline.At(std::string_view(p.key).substr(9))
                       : p.key.starts_with("model") && model ? *model
                                                              : item;
      at.Fail(p.key.empty() || p.key.starts_with("pipeline.") || p.key == "model" ? p.message
                                                                                : fmt::format("{}: {}", p.key, p.message));
    }
  }
  return tasks;
}

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
  p.data_parallel = 1;  // context_parallel is kept: plan tries the scenario's C (harness::DefaultContextParallel)
  p.tensor_parallel = 1;
  p.expert_parallel = 1;
  p.sequence_parallel = false;
  p.zero = 0;
  p.recompute = Recompute::kNone;
  p.partition = Partition::kEven;
  p.partition_layers.clear();
  // The busiest expert device's load applies to the layouts with expert parallelism the planner
  // tries (each validated then), not to the plain one.
  if (s.model.transformer && s.model.transformer->moe) s.model.transformer->moe->load_imbalance = 1;
  return s;
}

Scenario Load(std::string_view file_text, const std::string& path, const std::vector<std::string>& override_texts,
              bool new_layout, EngineChecks& checks) {
  const detail::ScenarioTree tree = detail::BuildTree(file_text, path, override_texts);
  const YAML::Node& root = tree.root;
  const std::vector<Override>& overrides = tree.overrides;
  const std::optional<std::string>& topology_file = tree.topology_file;
  const Origin file_origin{path, yaml::DirOf(path), -1, false};
  const Value root_value(root, "", file_origin, &overrides);
  const Map top(root_value, {"name", "topology", "model", "pipeline", "training", "models", "tasks"});
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
  s.topology = detail::ParseTopology(topology, tree.devices, checks.MemoryKernelNames());
  s.model = detail::ParseModel(top.Get("model"), s.pipeline.ranks);
  if (const auto training = top.Find("training")) {
    s.training = ParseTraining(*training);
    s.has_training = true;
  }
  s.training.dtype = ResolvePrecision(top, s.has_training);
  detail::ResolvePeaks(topology, s.training.dtype, &s.topology);
  ThrowProblems(new_layout ? WithPlainLayout(s) : s, root_value, topology, checks);
  if (const auto tasks = top.Find("tasks")) {
    s.tasks = ParseTasks(*tasks, top, s, checks);
  } else if (const auto models = top.Find("models")) {
    models->Fail("models are named by tasks: a scenario without tasks runs its model: block");
  }
  return s;
}

}  // namespace

Scenario TaskScenario(const Scenario& scenario, size_t index) { return Alone(scenario, scenario.tasks.at(index)); }

Scenario LoadScenario(const std::string& path, const std::vector<std::string>& overrides, EngineChecks& checks) {
  return LoadScenarioFromText(yaml::ReadFile(path, "a scenario file"), path, overrides, checks);
}

Scenario LoadScenarioFromText(std::string_view file_text, const std::string& path,
                              const std::vector<std::string>& overrides, EngineChecks& checks) {
  return Load(file_text, path, overrides, false, checks);
}

Scenario LoadScenarioForNewLayout(const std::string& path, const std::vector<std::string>& overrides,
                                  EngineChecks& checks) {
  return LoadScenarioForNewLayoutFromText(yaml::ReadFile(path, "a scenario file"), path, overrides, checks);
}

Scenario LoadScenarioForNewLayoutFromText(std::string_view file_text, const std::string& path,
                                         const std::vector<std::string>& overrides, EngineChecks& checks) {
  return Load(file_text, path, overrides, true, checks);
}

}  // namespace stagecraft::sim
