// A scenario (DESIGN.md §3): the machine, the model or its costs, the pipeline and, for the
// executor, training, as typed plain data (no header outside scenario/src sees yaml-cpp). Loaded from
// YAML with every value checked, or built in code; validate.h checks how its parts fit together.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "stagecraft/base/error.h"
#include "stagecraft/schedules/generators.h"
#include "stagecraft/schedules/lower.h"
#include "stagecraft/scenario/enum_names.h"
#include "stagecraft/scenario/limits.h"
#include "stagecraft/scenario/parallel_layout.h"
#include "stagecraft/scenario/profile.h"
#include "stagecraft/scenario/recompute.h"
#include "stagecraft/scenario/topology_spec.h"
#include "stagecraft/scenario/transformer_spec.h"

namespace stagecraft::sim {

// The run's precision. tf32 keeps fp32 tensors and rounds only inside the GEMMs.
// fp8 (E4M3 / E5M2 on FP8 tensor cores) is a GEMM precision only: a device states its peak, and
// training.fp8 runs the linear layers' GEMMs at it; no run stores its tensors in it.
enum class Dtype { kFp32, kTf32, kBf16, kFp16, kFp8 };  // kDtypeCount of them (topology_spec.h)
inline constexpr EnumName<Dtype> kDtypeNames[] = {{Dtype::kFp32, "fp32"},
                                                  {Dtype::kTf32, "tf32"},
                                                  {Dtype::kBf16, "bf16"},
                                                  {Dtype::kFp16, "fp16"},
                                                  {Dtype::kFp8, "fp8"}};
constexpr std::string_view Name(Dtype dtype) { return NameIn(kDtypeNames, dtype); }
// Bytes of one stored element: 4 for fp32 and tf32, 2 for bf16 and fp16, 1 for fp8.
constexpr int DtypeBytes(Dtype dtype) {
  return dtype == Dtype::kFp32 || dtype == Dtype::kTf32 ? 4 : dtype == Dtype::kFp8 ? 1 : 2;
}

// training.fp8_scaling: how the FP8 casts scale their tensors. Delayed (Transformer Engine's
// first recipe: from earlier steps' maxima) and blockwise (per 1x128 or 128x128 tile, DeepSeek-V3's,
// found inside the cast) read a tensor once; per-tensor current scaling reads it once more first,
// for its maximum.
enum class Fp8Scaling : uint8_t { kDelayed, kCurrent, kBlockwise };
inline constexpr EnumName<Fp8Scaling> kFp8ScalingNames[] = {
    {Fp8Scaling::kDelayed, "delayed"}, {Fp8Scaling::kCurrent, "current"}, {Fp8Scaling::kBlockwise, "blockwise"}};

enum class Optimizer { kSgd, kAdam };
inline constexpr EnumName<Optimizer> kOptimizerNames[] = {{Optimizer::kSgd, "sgd"}, {Optimizer::kAdam, "adam"}};
constexpr std::string_view Name(Optimizer optimizer) { return NameIn(kOptimizerNames, optimizer); }

enum class Activation { kGelu, kRelu };
inline constexpr EnumName<Activation> kActivationNames[] = {{Activation::kGelu, "gelu"}, {Activation::kRelu, "relu"}};
constexpr std::string_view Name(Activation activation) { return NameIn(kActivationNames, activation); }

enum class Loss { kMse, kCrossEntropy };
inline constexpr EnumName<Loss> kLossNames[] = {{Loss::kMse, "mse"}, {Loss::kCrossEntropy, "cross_entropy"}};
constexpr std::string_view Name(Loss loss) { return NameIn(kLossNames, loss); }


// How layers are split over the stages: by count, by cost (sim/layer_split.h), or as the scenario
// lists them (pipeline.partition: [n0, n1, ...], PipelineSpec::partition_layers; its name
// "given" is what reports print, never read).
enum class Partition { kEven, kBalanced, kGiven };
inline constexpr EnumName<Partition> kPartitionNames[] = {
    {Partition::kEven, "even"}, {Partition::kBalanced, "balanced"}, {Partition::kGiven, "given"}};
// The names a scenario or a plan may state.
inline constexpr EnumName<Partition> kPartitionChoices[] = {{Partition::kEven, "even"},
                                                            {Partition::kBalanced, "balanced"}};
constexpr std::string_view Name(Partition partition) { return NameIn(kPartitionNames, partition); }

// Its parameter counts, as the executor lays them out and the analytical model charges them
// (Megatron-LM's, with an untied head): a block 12h² + 13h (QKV, projection and the two MLP
// GEMMs with biases, two LayerNorms); the token and position embeddings (V + s)·h; the final
// LayerNorm and the LM head 2h + V·h.
constexpr int64_t GptBlockParams(int64_t hidden) { return 12 * hidden * hidden + 13 * hidden; }
constexpr int64_t GptEmbeddingParams(int64_t vocab, int64_t seq, int64_t hidden) { return (vocab + seq) * hidden; }
constexpr int64_t GptHeadParams(int64_t vocab, int64_t hidden) { return 2 * hidden + vocab * hidden; }

// The executor's network: per layer Linear(hidden, hidden) + bias -> activation, fp32 tensors.
struct MlpSpec {
  int layers = 0;
  int hidden = 0;
  bool residual = false;
  Activation activation = Activation::kGelu;
  Loss loss = Loss::kMse;
};

// The model FLOPs of one sample, forward and backward, by the convention of the transformer's
// (TransformerModelFlopsPerToken): 6 × the parameters its matmuls use, layers × hidden² (the
// biases, activations and loss are not counted).
constexpr double MlpModelFlopsPerSample(const MlpSpec& m) {
  return 6.0 * m.layers * static_cast<double>(m.hidden) * m.hidden;
}

// Explicit per-rank, per-microbatch costs of that rank's whole share of the model: each of
// forward .. weight_bytes has exactly one entry per rank (in YAML a scalar stands for every rank).
struct ExplicitCosts {
  std::vector<int64_t> forward_ns;
  std::vector<int64_t> backward_input_ns;
  std::vector<int64_t> backward_weight_ns;
  std::vector<int64_t> activation_bytes;
  std::vector<int64_t> weight_bytes;
  int64_t p2p_latency_ns = 0;  // added per hop
  // Activation/gradient size sent between neighbouring stages per microbatch; 0 = unknown,
  // a transfer then costs its latency only.
  int64_t send_bytes = 0;
};

struct ModelSpec {
  std::optional<TransformerSpec> transformer;
  std::optional<MlpSpec> mlp;
  std::optional<ExplicitCosts> costs;
  // A profile written by `stagecraft profile` (format in profile_yaml.h), read once when the
  // scenario is loaded and shared by every copy; null when none.
  std::shared_ptr<const Profile> profile;
  // Where it was read from (the cost source's label, "profile:<path>"). Paths in the scenario
  // file resolve against the scenario's directory; a path given through --set against the
  // current directory.
  std::string profile_path;
};

// The schedule name that runs the search (pipeline.schedule: auto).
inline constexpr std::string_view kSearchedSchedule = "auto";

// pipeline: in YAML one block; here its three parts (ParallelLayout in parallel_layout.h).
// PipelineSpec is all three, so `scenario.pipeline.ranks` reads as the file does; a function that
// needs one part takes it.

// What one pipeline runs: its schedules, the microbatches and steps, the stages per rank, what
// the backward recomputes, how layers are split over stages and how receives are posted.
// Copies between device and host memory (pipeline.offload; DESIGN.md §10).
enum class WeightsOffload : uint8_t { kNone, kSpill };
inline constexpr EnumName<WeightsOffload> kWeightsOffloadChoices[] = {{WeightsOffload::kNone, "none"},
                                                                      {WeightsOffload::kSpill, "spill"}};
enum class OptimizerPlace : uint8_t { kDevice, kHost };
inline constexpr EnumName<OptimizerPlace> kOptimizerPlaceChoices[] = {{OptimizerPlace::kDevice, "device"},
                                                                      {OptimizerPlace::kHost, "host"}};
struct OffloadSpec {
  double activations = 0;         // the share of each stage's stashed activations offloaded, in [0, 1]
  bool activations_auto = false;  // `auto`: as much as each stage's idle time hides
  WeightsOffload weights = WeightsOffload::kNone;  // spill: Hydra's shard at a time
  OptimizerPlace optimizer = OptimizerPlace::kDevice;  // host: state and step on the CPU (ZeRO-Offload)
  bool double_buffer = true;  // spill: the next shard copied in while this one computes

  bool any() const {
    return activations > 0 || activations_auto || weights != WeightsOffload::kNone ||
           optimizer != OptimizerPlace::kDevice;
  }
};

// How a multi-model workload's tasks share the devices (pipeline.task_scheduler; sim/workload.h).
enum class TaskScheduler : uint8_t { kLrtf, kSequential };
inline constexpr EnumName<TaskScheduler> kTaskSchedulerNames[] = {{TaskScheduler::kLrtf, "lrtf"},
                                                                  {TaskScheduler::kSequential, "sequential"}};
constexpr std::string_view Name(TaskScheduler scheduler) { return NameIn(kTaskSchedulerNames, scheduler); }

struct PipelineShape {
  // Generator names or schedule files (a name ending in ".csv": a torch.distributed.pipelining
  // order, one step of it, imported as `stagecraft schedule --import` reads it), or the single
  // entry "all".
  std::vector<std::string> schedules;
  std::map<std::string, std::string> schedule_files;  // a file's name as written -> its resolved path
  // pipeline.chunks as stated, 0 when absent. The schedules that interleave (interleaved, zb-v,
  // dualpipe-v) run it, or their own 2 when absent (schedules::ChunksFor); the others always run
  // one stage per rank. A stated value is never changed: one an interleaving schedule named
  // cannot run with, or that no schedule named takes, is an error at pipeline.chunks.
  int chunks = 0;
  int microbatches = 0;
  int microbatch_size = 1;
  int steps = 1;
  Recompute recompute = Recompute::kNone;  // YAML: none | selective | full, or false / true
  // pipeline.recompute_modules (with selective only; recompute.h): as stated, empty when absent.
  RecomputeModules recompute_modules;
  bool vertical_sync = false;
  Partition partition = Partition::kEven;
  // partition: [n0, n1, ...]: the layers of each stage, in stage order (Partition::kGiven).
  std::vector<int> partition_layers;
  // How receives are posted (schedules/lower.h): ahead (default) or lockstep.
  schedules::P2p p2p = schedules::P2p::kAhead;
  // With p2p: ahead, the receives posted and not yet consumed per local stage (lower.h; the
  // Zero Bubble paper's cost model, where a transfer starts as soon as its producer ends, takes
  // as many as a stage ever has in flight).
  int p2p_buffers = schedules::kAheadBuffersPerStage;
  OffloadSpec offload;
  // With tasks: how they share the devices (Sharded-LRTF, or one after another).
  TaskScheduler task_scheduler = TaskScheduler::kLrtf;

  bool runs_all() const { return schedules.size() == 1 && schedules.front() == "all"; }
  bool full_recompute() const { return recompute == Recompute::kFull; }
  // What a selective recompute of this pipeline rebuilds, whatever `recompute` says (plan tries
  // it): the modules stated, else core_attn (Megatron-LM's default).
  RecomputeModules ModulesIfSelective() const {
    return recompute_modules.empty() ? RecomputeModules{RecomputeModule::kCoreAttn} : recompute_modules;
  }
  // What its selective recompute rebuilds; none without one (full recompute rebuilds the whole block).
  RecomputeModules SelectiveModules() const {
    return recompute == Recompute::kSelective ? ModulesIfSelective() : RecomputeModules{};
  }
};

// How the schedules that search or solve are tuned: their budgets and memory limit.
struct PipelineTuning {
  // zb-auto's memory per rank in bytes (everything the rank holds); 0: the device's memory.
  int64_t memory_limit_bytes = 0;
  // `auto`: the op order `stagecraft search` makes for the scenario (harness/search.h), found
  // in this many annealing moves with seed 1, so simulate, execute and every rank get the same.
  int64_t search_evaluations = kDefaultSearchEvaluations;
  // zb-1p / zb-2p / zb-auto: the branch-and-bound nodes of the Zero Bubble scheduler's
  // refinement after its heuristic (schedules/zb_ilp.h; 0: the heuristic alone).
  int64_t zb_refine_nodes = 0;
};

// The whole `pipeline:` block.
struct PipelineSpec : ParallelLayout, PipelineShape, PipelineTuning {};

// training.lr_schedule.decay: after the warm-up the rate stays (none) or falls to min_lr by the
// run's last update along a line or a half cosine (Megatron-LM's lr_decay_style).
enum class LrDecay : uint8_t { kNone, kLinear, kCosine };
inline constexpr EnumName<LrDecay> kLrDecayNames[] = {
    {LrDecay::kNone, "none"}, {LrDecay::kLinear, "linear"}, {LrDecay::kCosine, "cosine"}};
constexpr std::string_view Name(LrDecay decay) { return NameIn(kLrDecayNames, decay); }

// training.lr_schedule (DESIGN.md §10), in training steps; every schedule uses it. The rate of an
// update is exec::LearningRate's (exec/learning_rate.h).
struct LrScheduleSpec {
  int64_t warmup_steps = 0;  // linear from lr / (warmup · updates per step) up to lr; 0: none
  LrDecay decay = LrDecay::kNone;
  double min_lr = 0;  // where the decay ends
};

// training.pipemare (DESIGN.md §10): PipeMare's two techniques (Yang et al., MLSys'21), for the
// schedule pipemare only, each switchable.
struct PipeMareSpec {
  // Learning-rate rescheduling: stage i's rate starts divided by its delay τ_i and reaches the
  // schedule's rate after K training steps, α / τ_i^(1 − min(k/K, 1)); 0: off.
  int64_t lr_reschedule_steps = 0;
  // Discrepancy correction: the backward uses weights extrapolated back by the stage's weight
  // velocity, one weight-sized buffer per stage.
  bool correction = false;
  double correction_decay = 0.9;  // γ of the velocity's moving average, in [0, 1)
};

struct TrainingSpec {
  Optimizer optimizer = Optimizer::kSgd;
  double lr = 0;
  double momentum = 0.9;  // sgd only
  int64_t seed = 1;
  // The run's one precision: what the executor trains in and what the transformer's analytical
  // model sizes its tensors by, set even without a training block (LoadScenario's rule: the
  // training block's dtype, else model.transformer.dtype, else fp32 with a training block and
  // bf16 without one; fp32 in a scenario built in code unless set).
  Dtype dtype = Dtype::kFp32;
  // training.fp8: the linear layers' GEMMs (attention's projections, the feed-forward's and the
  // experts', MLA's; their input-gradient and weight-gradient GEMMs too) run on the device's FP8
  // tensor cores, their inputs cast to FP8 by a kernel each, as Transformer Engine's FP8 recipes
  // run them under Megatron-LM; attention's scores, the router and the LM head stay in `dtype`,
  // which stores every tensor (a 16-bit one). Simulated only (roofline rows).
  bool fp8 = false;
  Fp8Scaling fp8_scaling = Fp8Scaling::kDelayed;  // training.fp8_scaling (with fp8)
  // training.grad_dtype: the gradients' precision, what they are accumulated in, held in and
  // reduced in (fp32 or the dtype). Unstated, Megatron-LM's default: fp32 for bf16 (bf16 forces
  // fp32 accumulation and all-reduce, unless --grad-reduce-in-bf16), else the dtype (fp16 keeps
  // 16-bit gradients unless --accumulate-allreduce-grads-in-fp32).
  std::optional<Dtype> grad_dtype;
  int GradBytes() const { return DtypeBytes(grad_dtype.value_or(dtype == Dtype::kBf16 ? Dtype::kFp32 : dtype)); }
  // training.fp8_dispatch (with fp8, MoE): the dispatch and the combine's gradients sent in FP8
  // (DeepSeek-V3 report §3.3.2; docs/cost-model.md).
  bool fp8_dispatch = false;
  // training.loss_scale: a power of two from 1 to 2^24 (exec::TrainingConfig::loss_scale); 0:
  // not given (4096 for fp16, else 1).
  double loss_scale = 0;
  // training.data: a token file the transformer trains on (llm.c's .bin shards, or any other
  // file as text tokenized by bytes), resolved like model.profile; empty: synthetic tokens.
  std::string data_path;
  LrScheduleSpec lr_schedule;
  std::optional<PipeMareSpec> pipemare;  // training.pipemare, when stated
  // training.target_loss: execute records when the moving mean of the training loss over the
  // last loss_window steps first reaches it (execute JSON target_reached_step, time_to_target_ms).
  std::optional<double> target_loss;
  int loss_window = 1;
};

// One model of a multi-model workload (`tasks:`, DESIGN.md §10): its name, its model (a name from
// the scenario's `models:`, inline, or the scenario's own) and its pipeline (the scenario's, with
// the keys the task states replaced; its steps are the task's).
struct TaskSpec {
  std::string name;
  std::string model_name;  // the `models:` entry it names; "" inline or the scenario's
  ModelSpec model;
  PipelineSpec pipeline;
};

struct Scenario {
  std::string name;
  std::string path;  // the scenario file as given ("" for one built in code)
  std::vector<std::string> overrides;  // the --set texts it was loaded with, in order
  TopologySpec topology;
  ModelSpec model;
  PipelineSpec pipeline;
  TrainingSpec training;
  bool has_training = false;
  // A multi-model workload's tasks, in the order listed; empty for a scenario of one model.
  std::vector<TaskSpec> tasks;
};

// The scenario of task `index` alone: its model and pipeline, no tasks, named "SCENARIO/TASK".
Scenario TaskScenario(const Scenario& scenario, size_t index);

// The node groups (TopologySpec::GroupOf) whose devices run pipeline rank `rank`: over its
// replicas and tensor ranks (ParallelLayout::DeviceOf), each group once, in group order ({0}
// for a topology of one device kind). The rank's ops run as fast as the slowest of them, and its
// memory is the smallest of theirs.
std::vector<int> RankGroups(const Scenario& sc, int rank);
// The names of RankGroups' devices, joined by `separator` ("H100-SXM", "H100-SXM+A100-SXM-80GB").
std::string RankDeviceNames(const Scenario& sc, int rank, std::string_view separator);
// The device memory of pipeline rank `rank` (the smallest of RankGroups' devices'), and of every
// rank, rank 0 first: the simulator's OOM check.
int64_t RankDeviceMemory(const Scenario& sc, int rank);
std::vector<int64_t> RankDeviceMemories(const Scenario& sc);
// The memory pipeline rank `rank` may fill (zb-auto, the search): pipeline.memory_limit when
// stated, else RankDeviceMemory.
int64_t RankMemoryLimit(const Scenario& sc, int rank);

// How the devices split themselves between ranks that share one (DeviceSpec::time_slice_ns):
// the devices agree (Validate refuses node groups that differ where ranks share devices).
int64_t TimeSliceNs(const Scenario& sc);

class EngineChecks;  // validate.h

// Loads a scenario and validates it, with an engine's `checks` (validate.h) at their places; the
// simulator's LoadScenario (sim/scenario_checks.h) passes its own. `overrides` are "--set"
// values "key.path=value" (the value parsed as YAML, so "pipeline.schedule=[gpipe, 1f1b]" works;
// a list entry is addressed by its index, "topology.links.0.latency=3us"), applied in order to
// the YAML tree before it is read. Every value is checked against its form and range (limits.h)
// as it is read, model.profile is read once, then Validate (validate.h) checks how the parts fit
// and `checks` what the engine derives from them.
// Every problem throws stagecraft::InputError: "file:line:col: key.path: what, expected form",
// "--set key.path: ..." for a value that came from an override, "path: cannot read: REASON" for a
// file (read through stagecraft::ReadInputFile, at most kMaxYamlBytes, one YAML document); the
// problems Validate finds together, joined by "; ".
// `topology:` may be a file name (relative to the scenario file, or to the current directory
// when given through --set); errors inside it name that file.
//
// Precision is stated once: training.dtype. model.transformer.dtype, its older place, is still
// read: alone it sets the precision, beside training.dtype it must name the same stored type
// (fp32 with tf32 is the same: tf32 stores fp32).
Scenario LoadScenario(const std::string& path, const std::vector<std::string>& overrides, EngineChecks& checks);
// The same from the file's text: `path` names it in errors and is the base of its relative
// file names.
Scenario LoadScenarioFromText(std::string_view text, const std::string& path,
                              const std::vector<std::string>& overrides, EngineChecks& checks);

// For a command that replaces the pipeline's layout (`stagecraft plan`): the scenario read and
// range-checked as LoadScenario reads it, the layout keys (schedule, ranks, chunks,
// microbatches, microbatch_size, data_parallel, tensor_parallel, sequence_parallel, zero,
// recompute, partition) returned as written, but the rest (model, topology, training, the other
// pipeline keys) validated against the simplest layout instead: one 1F1B rank (the written ranks
// with explicit per-rank costs), one microbatch of one sample (a profile's own size), no
// replicas, no tensor split, ZeRO 0, no recompute, an even partition. A layout the command will
// replace is no reason to refuse the scenario.
Scenario LoadScenarioForNewLayout(const std::string& path, const std::vector<std::string>& overrides,
                                  EngineChecks& checks);
Scenario LoadScenarioForNewLayoutFromText(std::string_view text, const std::string& path,
                                         const std::vector<std::string>& overrides, EngineChecks& checks);

// The scenario file as LoadScenario(path, overrides) reads it, as one YAML document: its
// topology file and library device put in place, the overrides applied, and the files it names
// (model.profile, training.data, schedule files) made absolute, so the text loads the same
// scenario from any directory (`stagecraft plan --write-best` writes its winner with it).
std::string ScenarioText(const std::string& path, const std::vector<std::string>& overrides = {});

// The generator parameters of one schedule of `pipeline`, used both to check the scenario and
// to run it. A schedule that interleaves runs pipeline.chunks virtual stages per rank when it is
// stated, else its own (schedules::ChunksFor); the others one. Under `schedule: all`, vertical_sync reaches
// pipedream only.
schedules::GeneratorParams GeneratorParamsFor(const PipelineSpec& pipeline, const schedules::GeneratorInfo& info);

}  // namespace stagecraft::sim
