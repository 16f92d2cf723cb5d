// The plan's space (plan.h), internal to the harness: what the search reads, the configurations
// it enumerates (layouts P x D x T, batch splits, schedules with their chunks, recompute, ZeRO
// and the partition) and the cost tables they share.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "stagecraft/harness/plan.h"
#include "stagecraft/harness/predict.h"
#include "stagecraft/schedules/generators.h"
#include "stagecraft/scenario/scenario.h"
#include "stagecraft/sim/topology.h"

namespace stagecraft::harness::detail {

// A recompute the plan tries: its kind and, with selective, the modules (PlanConfig's).
struct RecomputeChoice {
  sim::Recompute kind = sim::Recompute::kNone;
  sim::RecomputeModules modules;
  friend bool operator==(const RecomputeChoice&, const RecomputeChoice&) = default;
};

// Everything the search reads, fixed before it starts.
struct Space {
  Space(const sim::Scenario& scenario, const PlanOptions& plan) : base(scenario), options(plan), topology(scenario.topology) {}
  const sim::Scenario& base;
  const PlanOptions& options;
  sim::Topology topology;
  int layers = 0;
  int64_t limit_bytes = 0;
  std::vector<const schedules::GeneratorInfo*> generators;
  std::vector<RecomputeChoice> recompute;
  std::vector<int> contexts;  // the C tried (PlanOptions::context_parallel or DefaultContextParallel)
  int max_threads = 1;
};

// What a cost table depends on.
struct CostKey {
  int ranks, chunks, data_parallel, tensor_parallel, context_parallel, expert_parallel, microbatch_size, zero;
  std::vector<sim::Axis> device_order;  // PlanConfig::placement
  schedules::Placement placement;
  sim::Recompute recompute;
  std::string recompute_modules;  // PlanConfig::recompute_modules' Names()
  sim::Partition partition;
  bool sequence_parallel, per_microbatch_updates;
  auto operator<=>(const CostKey&) const = default;
};

// A configuration that passed topology, batch and shape, with its cost table's key.
struct Candidate {
  PlanConfig config;
  const schedules::GeneratorInfo* info = nullptr;
  int facts = 0;
  int64_t floor_ns = 0;
  double ops = 0;  // schedules::EstimateSize's: what building and simulating it holds
};

// The model's layers (transformer, MLP or profile); 0 for explicit per-rank costs.
int ModelLayers(const sim::Scenario& scenario);

// Throws InputError naming the flag the scenario cannot take (--gpus beyond the topology or not
// whole nodes, no batch or one no job of --gpus devices can take, a model without layers, every
// number out of its range, --tensor-parallel sizes none of which divides --gpus, --schedules
// with no generator to enumerate).
void CheckInputs(const sim::Scenario& scenario, const PlanOptions& options);

// The C the plan tries, ascending and each once: options.context_parallel, or with none asked
// DefaultContextParallel's.
std::vector<int> ContextsTried(const sim::Scenario& scenario, const PlanOptions& options);

// The entry of a simulated configuration (plan.cpp): its metrics, worst rank and peak, memory
// terms, whether it fits the space's limit, its TFLOPS per GPU and mean step split.
PlanEntry EntryOf(const Space& space, const PlanConfig& c, const Prediction& p, double seconds);

// When nothing fits and the scenario has a host and copies nothing itself: the 16 fastest of
// `sorted` (by their time floors) with every stash offloaded, then, when none of those fits and
// the host can take the step, with the optimizer on the host too; what fits goes into `result`
// with a note (plan_offload.cpp). Returns how many configurations it tried.
size_t TryOffload(const Space& space, const std::vector<Candidate>& sorted, PlanResult* result);

// The divisors of n in increasing order, in O(sqrt(n)) steps: n may be up to 2^48 (a replica's
// share of the batch).
std::vector<int64_t> Divisors(int64_t n);

// A placement's axes by name, innermost first ("tensor", "pipeline", "data").
inline std::vector<std::string_view> AxisNames(const std::vector<sim::Axis>& placement) {
  std::vector<std::string_view> names;
  for (const sim::Axis axis : placement) names.push_back(sim::Name(axis));
  return names;
}

// The generators --schedules names (auto aside: the refinement's), or all of them (and, for a
// model with mixture-of-experts layers, the ones for expert parallelism).
std::vector<const schedules::GeneratorInfo*> GeneratorsOf(const PlanOptions& options, bool moe = false);

// Whether some layout P x D x T = gpus / C of the C tried has a tensor group of `tp`.
inline bool SomeLayoutTakes(const std::vector<int>& contexts, int gpus, int tp) {
  return std::any_of(contexts.begin(), contexts.end(), [&](int c) { return gpus / c % tp == 0; });
}

// The recomputes the plan tries for `asked` (PlanOptions::recompute; empty: none, selective and
// full), in that order. Selective, with model.transformer only, is each of these sets of modules
// (pipeline.recompute_modules) once, in this order: the scenario's (Megatron-LM's default,
// core_attn, when it states none); Megatron-LM's fine-grained recompute for MoE models
// (`--recompute-modules mla_up_proj layernorm moe_act`, its MoE guide), core_attn too with an
// unfused attention, each of them only where the model has what it drops; and with MoE layers the
// same with the whole MoE layer (moe) for its activation. Each set less the modules that drop
// nothing the model keeps (core_attn with a fused attention kernel, which keeps no scores;
// layernorm in a dense layer without MLA, whose LayerNorms are fused into the next GEMM; a module
// of a part the model lacks), and a set left empty not tried, unless selective was asked and every
// one is: then the scenario's as stated. Throws InputError for selective asked without a
// transformer.
std::vector<RecomputeChoice> RecomputeChoices(const sim::Scenario& scenario, const std::vector<sim::Recompute>& asked);

// The rest of `space` from its scenario and options: the layers, the memory limit, the
// generators, the recomputes (RecomputeChoices), the context parallelism tried and the threads.
void FillSpace(Space* space);

// Every configuration of the space that passes topology, batch and shape and is within --max-ops,
// with the index of its cost table's key in `keys`; the layouts and configurations refused on
// the way are counted in `result`, and the ops of those kept summed in result->space_ops.
std::vector<Candidate> Enumerate(const Space& space, PlanResult* result, std::vector<CostKey>* keys);

// The plan's budget (PlanOptions::max_plan_ops): when the candidates' ops sum past it, keeps
// those with the fewest microbatches whose ops fit it, counts the others as kPlanBudget and
// notes it in `result`; throws InputError naming --global-batch and --max-plan-ops when even the
// candidates with the fewest microbatches pass it. Before any cost table is built.
void KeepWithinBudget(const Space& space, std::vector<Candidate>* candidates, PlanResult* result);

}  // namespace stagecraft::harness::detail
