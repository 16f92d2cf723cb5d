// `stagecraft plan`: how to lay a model out on N devices for a global batch. It enumerates the
// layouts P x D x T x C = N that the topology and the model allow (C: context parallelism), the microbatch sizes and counts
// that make the batch (B = D x b x m), every schedule that takes the shape (with its chunks),
// recompute, ZeRO-1 and the partition; prunes with closed forms (a memory floor of weights,
// gradients, optimizer state and one microbatch's activations; a step-time floor of the
// busiest rank's compute and the pipeline's fill and drain) and then with the schedule's own op
// order (its activations in flight, and its critical path at the stages' costs with free
// transfers: the bubble formula of any order); simulates on every core what could still beat
// the K-th best, and refines the leaders with the searched `auto` order (harness/search.h).
// Its whole work is estimated before any of it starts (schedules/budget.h's ops, summed over the
// space) and bounded: past --max-plan-ops the configurations with the most microbatches are left
// out, with a note.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "stagecraft/harness/predict.h"
#include "stagecraft/schedules/metrics.h"
#include "stagecraft/scenario/scenario.h"

namespace stagecraft::harness {

// One point of the space: the pipeline keys a scenario needs to run it.
struct PlanConfig {
  std::string schedule;
  int ranks = 1, data_parallel = 1, tensor_parallel = 1;
  // pipeline.context_parallel: each sequence split over C devices (PlanOptions::context_parallel).
  int context_parallel = 1;
  // pipeline.expert_parallel: with mixture-of-experts layers, plan tries every E that divides the
  // experts and D x C x T (1 for a dense model).
  int expert_parallel = 1;
  // pipeline.placement: on a topology of several device groups, plan tries the pipeline's stages
  // across the groups (tensor, data, pipeline: Megatron-LM's order) and each pipeline within
  // one group, the replicas across them (tensor, pipeline, data); empty: the scenario's.
  std::vector<sim::Axis> placement;
  int chunks = 1;  // virtual stages per rank (interleaved: v; the V schedules: 2)
  int microbatches = 1, microbatch_size = 1;
  sim::Recompute recompute = sim::Recompute::kNone;
  // pipeline.recompute_modules with selective: the set of modules this configuration recomputes
  // (plan's sets: RecomputeChoices, docs/plan.md); empty with none and full.
  sim::RecomputeModules recompute_modules;
  int zero = 0;
  sim::Partition partition = sim::Partition::kEven;
  bool sequence_parallel = false;
  // pipeline.offload.activations: the share of each stage's stashes copied to the host; plan
  // tries 1 (every stash) only when nothing fits without (docs/plan.md).
  double offload_activations = 0;
  // pipeline.offload.optimizer: host (ZeRO-Offload): plan tries it beside every stash offloaded
  // only when that alone fits nothing and the host can take the step (docs/plan.md).
  bool optimizer_on_host = false;
  friend bool operator==(const PlanConfig&, const PlanConfig&) = default;
};

// "interleaved P64 D6 T8 b1 m512 v2 full zero-1 even"
std::string DescribeConfig(const PlanConfig& config);
// The recompute as DescribeConfig and the table state it: "none", "full", "selective" (Megatron-LM's
// default module, core_attn, alone) or the selective modules shortened, "sel:ln+mla+act" (attn,
// ln, mla, act, mlp, moe, shared: core_attn, layernorm, mla_up_proj, moe_act, mlp, moe,
// shared_experts); JSON and the overrides name them in full.
std::string RecomputeLabel(const PlanConfig& config);

// Why a configuration was left out. The first two are counted per layout (P x D x T), the
// others per configuration.
enum class PlanReject {
  kTopology,    // T does not divide the node's devices or the model's heads (or the model has no tensor split)
  kBatch,       // D does not divide the global batch
  kShape,       // the schedule does not take the shape (or the model has fewer layers than stages)
  kTooLarge,    // the schedule is over --max-ops, or its run past the simulator's limits
  kMemory,      // over the memory limit: by the floor, by the order's activations, or simulated
  kBound,       // pruned: its step-time floor cannot beat the K-th best
  kPlanBudget,  // left out before the search: more microbatches than the plan's budget of ops allows
};
inline constexpr int kPlanRejectKinds = 7;
std::string_view Name(PlanReject reject);  // "topology", "indivisible batch", ...

struct PlanProgress {
  int64_t candidates = 0;  // configurations that passed the closed forms, to go through
  int64_t done = 0;        // of them: pruned, rejected or simulated
  int64_t simulated = 0;
  double seconds = 0;
};

// The default bound on a plan's whole work: the ops of every configuration it may simulate,
// summed (schedules::EstimateSize each). The 1T GPT's space on 3,072 GPUs is about 6.7e8 and
// the 1.3B's on 8 GPUs at a global batch of 8,192 about 3.2e8 (52 s on 2 cores; the pruning
// simulates about an eighth of the ops summed, and builds the order of a few more).
inline constexpr int64_t kDefaultMaxPlanOps = 1'000'000'000;
// The most threads a plan may run (--threads, Python's threads): 4 per core this machine has
// (std::thread::hardware_concurrency, 1 when unknown), and never more than kMaxPlanThreads;
// each one holds a stack and a schedule of up to --max-ops ops, and more threads than cores
// only share them.
inline constexpr int kMaxPlanThreads = 256;
int MaxPlanThreads();

struct PlanOptions {
  int gpus = 0;
  int64_t global_batch = 0;
  // What a configuration may hold per device; 0: pipeline.memory_limit, else the device's
  // memory. Also set as pipeline.memory_limit of every configuration (zb-auto and auto obey it).
  int64_t memory_limit_bytes = 0;
  std::vector<int> tensor_parallel;        // the T to try; empty: every T the topology and model allow
  // The C to try (pipeline.context_parallel); empty: DefaultContextParallel's.
  std::vector<int> context_parallel;
  std::vector<std::string> schedules;      // generators to try; empty: all of them
  // Empty: none, selective (transformer only; each of RecomputeChoices' module sets) and full.
  std::vector<sim::Recompute> recompute;
  std::vector<sim::Partition> partitions;  // empty: even, and balanced where it splits otherwise
  std::vector<int> zero;                   // empty: 0, and 1 where D > 1
  int max_microbatch_size = 0;             // 0: no bound
  int max_chunks = 8;                      // interleaved's v: 2 .. this, dividing the layers by P·v
  int top = 10;                            // the K kept exact (the pruning's threshold)
  int threads = 0;                         // 0: every core; at most MaxPlanThreads()
  int64_t max_ops = 0;                     // per configuration (budget.h); 0: schedules::kDefaultMaxOps
  // The whole plan (kDefaultMaxPlanOps); 0: that default. A space whose ops sum past it keeps the
  // configurations with the fewest microbatches that fit it (a note says how many were left
  // out); one whose fewest-microbatch configurations alone pass it is refused.
  int64_t max_plan_ops = 0;
  // The searched order (`auto`) for the leading `refine` layouts, each with `search_evaluations`
  // moves (0: pipeline.search_evaluations), skipped where the leader's own simulation times the
  // moves would pass `refine_seconds`.
  int refine = 3;
  int64_t search_evaluations = 0;
  double refine_seconds = 20;
  std::function<void(const PlanProgress&)> progress;  // called from the workers, serialized
  // Each note as it is made, besides PlanResult::notes: the budget's narrowing is known before
  // anything is simulated, and a user waiting for the plan is told at once.
  std::function<void(const std::string&)> note;
  // Set by the caller to stop the plan (Python's Ctrl-C): no configuration starts after it and
  // Plan returns what it has, incomplete; the caller discards it.
  const std::atomic<bool>* cancel = nullptr;
};

// A simulated configuration.
struct PlanEntry {
  PlanConfig config;
  schedules::ScheduleMetrics metrics;
  int worst_rank = 0;                 // the rank with the highest peak
  int64_t peak_bytes = 0;
  MemoryTerms memory;                 // of that rank
  bool fits = false;                  // peak within the limit on every rank, no OOM
  double bound_ms = 0;                // the step-time floor it was let through with
  // Per step (the run's / steps, as step_time_ms is) and per rank, averaged: compute, wait,
  // transfer, collective, overhead, idle, and the wait for reloads (offload); they sum to
  // step_time_ms.
  double mean_step_split_ms[7] = {};
  double seconds = 0;                 // what simulating it took
};

struct PlanResult {
  std::string scenario;
  std::string cost_source;
  int gpus = 0;
  int64_t global_batch = 0;
  int64_t memory_limit_bytes = 0;
  std::vector<int> context_parallel;  // the C tried, ascending
  int layouts = 0;                    // P x D x T x C = gpus
  // Layouts left out whole: by topology, batch, or shape (deeper than the model's layers).
  std::array<int, kPlanRejectKinds> layouts_rejected{};
  int64_t enumerated = 0;             // configurations of the layouts that passed topology and batch
  double space_ops = 0;               // the ops of those within --max-ops, summed (before the budget)
  int max_microbatches = 0;           // the most microbatches a configuration kept has when the budget left some out; 0: none left out
  int64_t simulated = 0;
  std::array<int64_t, kPlanRejectKinds> rejected{};
  int64_t memory_rejected_simulated = 0;  // of rejected[kMemory]: found by simulating
  std::vector<PlanEntry> entries;     // every simulated configuration, fastest first (fitting ones before)
  std::vector<int> pareto;            // indexes into entries: throughput against peak memory, memory ascending
  std::vector<std::string> notes;     // the refinement's, one line each
  int threads = 1;
  double seconds = 0;
  const PlanEntry* best() const { return !entries.empty() && entries.front().fits ? &entries.front() : nullptr; }
};

// The shortest a device's share of a sequence may be for the plan to try context parallelism
// unasked: 4,096 tokens (Megatron-LM and NeMo split sequences of 8K and longer: Llama 3.1 405B's
// recipes CP 2 at 8,192 tokens, the Llama 3 paper's CP 16 at 131,072).
inline constexpr int64_t kMinContextTokens = 4096;
// The C the plan tries unless told (--context-parallel): 1, and every C > 1 that divides `gpus`,
// that the model takes (sim::ContextParallelProblem) and that is the scenario's or leaves each
// device at least kMinContextTokens of a sequence; ascending.
std::vector<int> DefaultContextParallel(const sim::Scenario& scenario, int gpus);

// Throws InputError naming the flag for --gpus or --global-batch the topology or model cannot
// take, and when no configuration fits.
PlanResult Plan(const sim::Scenario& scenario, const PlanOptions& options);

// The scenario that runs `config`: `base` with its pipeline keys set (and the memory limit and
// search moves of `options` when they are set).
sim::Scenario ScenarioFor(const sim::Scenario& base, const PlanConfig& config, const PlanOptions& options);
// The same as --set texts for LoadScenario / ScenarioText ("pipeline.ranks=8", ...).
std::vector<std::string> ConfigOverrides(const PlanConfig& config, const PlanOptions& options);

// The command's --recompute and --partition texts (Python's arguments too): each a name of
// sim::kRecomputeNames / kPartitionNames; throws InputError naming `what` and the names known.
std::vector<sim::Recompute> ParseRecomputeNames(const std::vector<std::string>& texts, std::string_view what);
std::vector<sim::Partition> ParsePartitionNames(const std::vector<std::string>& texts, std::string_view what);
// The command's --memory-limit text (Python's memory_limit): a size above 0 bytes (scenario/units.h);
// 0 for an empty text (PlanOptions' default); throws InputError naming `what`.
int64_t ParsePlanMemoryLimit(const std::string& text, std::string_view what);

// What --write-best writes: a comment naming the winner, then the scenario file at
// `scenario_path` with `sets` and the winner's pipeline keys (sim::ScenarioText), checked to
// load with the winner's pipeline. `result` must have a best.
std::string BestScenarioText(const std::string& scenario_path, std::vector<std::string> sets, const PlanResult& result,
                             const PlanOptions& options);

// The report: the top `top`, why the leaders win, the rejections and the Pareto front.
std::string DescribePlan(const PlanResult& result, int top);
// Every simulated configuration: its layout, whether it fits, its floor, its memory terms and
// the metrics object `simulate --json` writes per schedule (metrics_json.h).
std::string PlanJson(const PlanResult& result);
// The Pareto front as a terminal scatter plot (`width` x `height` cells) and as a PNG image.
std::string ParetoAscii(const PlanResult& result, int width = 64, int height = 16);
std::string ParetoPng(const PlanResult& result, int width = 800, int height = 500);

}  // namespace stagecraft::harness
