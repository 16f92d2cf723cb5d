// The plan's space (see plan_space.h): the layouts the topology and model
// allow, the batch splits, every schedule with its chunks, recompute, ZeRO and the partition,
// and each configuration's scenario; the options, the C tried and the budget on the whole are
// plan_checks.cpp's. Needs sim and schedules only (the plan fuzz harness compiles the two alone).
#include "plan_space.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <tuple>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "stagecraft/base/error.h"
#include "stagecraft/schedules/budget.h"
#include "stagecraft/schedules/weight_policy.h"
#include "stagecraft/sim/layer_split.h"
#include "stagecraft/scenario/limits.h"
#include "stagecraft/scenario/validate.h"

namespace stagecraft::harness {

int MaxPlanThreads() {
  const int64_t cores = std::max(1u, std::thread::hardware_concurrency());
  return static_cast<int>(std::min<int64_t>(4 * cores, kMaxPlanThreads));
}

sim::Scenario ScenarioFor(const sim::Scenario& base, const PlanConfig& c, const PlanOptions& options) {
  sim::Scenario sc = base;
  sim::PipelineSpec& p = sc.pipeline;
  p.schedules = {c.schedule};
  p.schedule_files.clear();
  p.ranks = c.ranks;
  p.chunks = c.chunks;
  p.microbatches = c.microbatches;
  p.microbatch_size = c.microbatch_size;
  p.data_parallel = c.data_parallel;
  p.tensor_parallel = c.tensor_parallel;
  p.context_parallel = c.context_parallel;
  p.expert_parallel = c.expert_parallel;
  if (!c.placement.empty()) p.placement = c.placement;
  p.sequence_parallel = c.sequence_parallel;
  p.zero = c.zero;
  p.recompute = c.recompute;
  if (c.recompute == sim::Recompute::kSelective) p.recompute_modules = c.recompute_modules;
  p.partition = c.partition;
  if (c.offload_activations > 0) p.offload.activations = c.offload_activations;
  if (c.optimizer_on_host) p.offload.optimizer = sim::OptimizerPlace::kHost;
  if (options.memory_limit_bytes > 0) p.memory_limit_bytes = options.memory_limit_bytes;
  if (options.search_evaluations > 0) p.search_evaluations = options.search_evaluations;
  return sc;
}

std::vector<std::string> ConfigOverrides(const PlanConfig& c, const PlanOptions& options) {
  std::vector<std::string> sets = {
      fmt::format("pipeline.schedule={}", c.schedule),
      fmt::format("pipeline.ranks={}", c.ranks),
      fmt::format("pipeline.chunks={}", c.chunks),
      fmt::format("pipeline.microbatches={}", c.microbatches),
      fmt::format("pipeline.microbatch_size={}", c.microbatch_size),
      fmt::format("pipeline.data_parallel={}", c.data_parallel),
      fmt::format("pipeline.tensor_parallel={}", c.tensor_parallel),
      fmt::format("pipeline.context_parallel={}", c.context_parallel),
      fmt::format("pipeline.sequence_parallel={}", c.sequence_parallel ? "true" : "false"),
      fmt::format("pipeline.zero={}", c.zero),
      fmt::format("pipeline.recompute={}", sim::Name(c.recompute)),
      fmt::format("pipeline.partition={}", sim::Name(c.partition)),
  };
  if (c.recompute == sim::Recompute::kSelective) {
    sets.push_back(fmt::format("pipeline.recompute_modules=[{}]", c.recompute_modules.Names()));
  }
  // Always: a scenario that states another E is what the plan replaced.
  sets.push_back(fmt::format("pipeline.expert_parallel={}", c.expert_parallel));
  if (!c.placement.empty()) {
    sets.push_back(fmt::format("pipeline.placement=[{}]", fmt::join(detail::AxisNames(c.placement), ", ")));
  }
  if (c.offload_activations > 0) sets.push_back(fmt::format("pipeline.offload.activations={:g}", c.offload_activations));
  if (c.optimizer_on_host) sets.push_back("pipeline.offload.optimizer=host");
  if (options.memory_limit_bytes > 0) sets.push_back(fmt::format("pipeline.memory_limit={}B", options.memory_limit_bytes));
  if (options.search_evaluations > 0) {
    sets.push_back(fmt::format("pipeline.search_evaluations={}", options.search_evaluations));
  }
  return sets;
}

}  // namespace stagecraft::harness

namespace stagecraft::harness::detail {

using schedules::GeneratorInfo;

std::vector<int64_t> Divisors(int64_t n) {
  std::vector<int64_t> low, high;
  for (int64_t d = 1; d <= n / d; ++d) {
    if (n % d != 0) continue;
    low.push_back(d);
    if (d != n / d) high.push_back(n / d);
  }
  low.insert(low.end(), high.rbegin(), high.rend());
  return low;
}

int ModelLayers(const sim::Scenario& sc) {
  if (sc.model.transformer) return sc.model.transformer->layers;
  if (sc.model.mlp) return sc.model.mlp->layers;
  if (sc.model.profile) return static_cast<int>(sc.model.profile->layers.size());
  return 0;
}

std::vector<const GeneratorInfo*> GeneratorsOf(const PlanOptions& o, bool moe) {
  std::vector<const GeneratorInfo*> out;
  bool searched = false;
  for (const std::string& name : o.schedules) {
    if (name == sim::kSearchedSchedule) {
      searched = true;  // the refinement's
      continue;
    }
    const GeneratorInfo* info = schedules::FindGenerator(name);
    if (info == nullptr) {
      throw InputError(fmt::format("--schedules: unknown schedule '{}' (known: {}, {})", name,
                                   schedules::GeneratorNames(), sim::kSearchedSchedule));
    }
    if (std::find(out.begin(), out.end(), info) == out.end()) out.push_back(info);
  }
  if (o.schedules.empty()) {
    for (const GeneratorInfo& info : schedules::Generators()) {
      if (info.in_all || (moe && info.for_expert_parallel)) out.push_back(&info);  // spilled is a one-device job's
    }
  }
  if (out.empty() && searched) {
    throw InputError(fmt::format("--schedules {}: not a schedule plan can enumerate: it is searched on the leading "
                                 "layouts the generators find (--refine); name generators beside it "
                                 "(--schedules 1f1b,zb-h1,{}) or leave --schedules out",
                                 sim::kSearchedSchedule, sim::kSearchedSchedule));
  }
  return out;
}

void FillSpace(Space* space) {
  const sim::Scenario& scenario = space->base;
  const PlanOptions& options = space->options;
  space->layers = ModelLayers(scenario);
  space->limit_bytes = options.memory_limit_bytes > 0                  ? options.memory_limit_bytes
                       : scenario.pipeline.memory_limit_bytes > 0      ? scenario.pipeline.memory_limit_bytes
                                                                       : std::numeric_limits<int64_t>::max();
  // With node groups, the smallest device's (each layout's ranks are then checked on their own).
  for (int g = 0; g < scenario.topology.group_count(); ++g) {
    space->limit_bytes = std::min(space->limit_bytes, scenario.topology.GroupDevice(g).memory_bytes);
  }
  const bool moe = scenario.model.transformer && scenario.model.transformer->moe.has_value();
  space->generators = GeneratorsOf(options, moe);
  space->recompute = RecomputeChoices(scenario, options.recompute);
  space->contexts = ContextsTried(scenario, options);
  const unsigned cores = std::thread::hardware_concurrency();
  space->max_threads = options.threads > 0 ? options.threads : static_cast<int>(std::max(1u, cores));
}

namespace {

// The chunks each generator runs at P ranks: interleaved every v from 2 to max_chunks with P·v
// dividing the layers (Megatron-LM's rule: equal layers per virtual stage); the V schedules 2.
// None on one pipeline rank (Megatron-LM refuses virtual stages at P = 1): no bubble for chunks
// to shrink; what they would overlap with replicas (each chunk's all-reduce started when its
// backward ends) is what DDP's buckets do without them, pipeline.grad_reduce_overlap.
std::vector<int> ChunksFor(const GeneratorInfo& info, int ranks, int layers, int max_chunks) {
  if (!info.interleaved) return {1};
  if (ranks == 1) return {};
  if (info.placement == schedules::Placement::kV) return {2};
  std::vector<int> out;
  for (int v = 2; v <= max_chunks && int64_t{ranks} * v <= layers; ++v) {
    if (layers % (ranks * v) == 0) out.push_back(v);
  }
  return out;
}

// Whether the balanced partition differs from the even one at these stages (else it is not
// enumerated: the same configuration twice).
class PartitionCache {
 public:
  // `chunks` stages per rank of sc.pipeline.ranks, loop placement (node groups weigh each
  // rank's stages by its device, which its ranks and replicas decide).
  bool Differs(const sim::Scenario& sc, int chunks) {
    const auto key = std::tuple{sc.pipeline.ranks,          chunks, sc.pipeline.recompute,
                                sc.pipeline.SelectiveModules().Names(), sc.pipeline.tensor_parallel,
                                sc.pipeline.replicas()};
    const std::lock_guard<std::mutex> lock(mutex_);
    if (const auto it = known_.find(key); it != known_.end()) return it->second;
    sim::Scenario even = sc, balanced = sc;
    even.pipeline.partition = sim::Partition::kEven;
    balanced.pipeline.partition = sim::Partition::kBalanced;
    bool differs = false;
    try {
      const schedules::Shape shape{sc.pipeline.ranks, chunks, schedules::Placement::kLoop};
      differs = sim::StageLayers(even, shape) != sim::StageLayers(balanced, shape);
    } catch (const InputError&) {
    }
    return known_[key] = differs;
  }

 private:
  std::mutex mutex_;
  std::map<std::tuple<int, int, sim::Recompute, std::string, int, int>, bool> known_;
};

// The T a layout may not have: the model shards no layer, the tensor group would leave its node
// (Megatron-LM keeps it on NVLink), or a device would hold part of an attention head.
bool TensorFits(const sim::Scenario& sc, int tp) {
  if (tp == 1) return true;
  if (!sc.model.transformer) return false;
  if (!sc.topology.explicit_graph()) {
    for (int n = 0; n < sc.topology.node_count(); ++n) {
      if (sc.topology.DevicesOnNode(n) % tp != 0) return false;
    }
  }
  return sc.model.transformer->heads % tp == 0;
}

// The microbatch sizes of a replica's share of the batch: a profile's own, else every divisor
// up to the bound (and the scenario's limit).
std::vector<int> MicrobatchSizes(const Space& space, int64_t per_replica) {
  std::vector<int> sizes;
  if (space.base.model.profile) {
    const int b = space.base.model.profile->microbatch_size;
    if (per_replica % b == 0) sizes.push_back(b);
    return sizes;
  }
  const int bound = space.options.max_microbatch_size == 0 ? sim::kMaxMicrobatchSize
                                                           : std::min(space.options.max_microbatch_size, sim::kMaxMicrobatchSize);
  for (const int64_t b : Divisors(per_replica)) {
    if (b <= bound) sizes.push_back(static_cast<int>(b));
  }
  return sizes;
}

class Enumerator {
 public:
  Enumerator(const Space& space, PlanResult* result)
      : space_(space),
        result_(result),
        max_ops_(space.options.max_ops > 0 ? space.options.max_ops : schedules::kDefaultMaxOps) {}

  std::vector<Candidate> Run() {
    // Each C tried: P x D x T over the devices it leaves.
    for (const int context : space_.contexts) {
      const int64_t devices = space_.options.gpus / context;
      for (const int64_t tp : Divisors(devices)) {
        for (const int64_t ranks : Divisors(devices / tp)) {
          Layout(static_cast<int>(ranks), static_cast<int>(devices / tp / ranks), static_cast<int>(tp), context);
        }
      }
    }
    return std::move(candidates_);
  }
  std::vector<CostKey> TakeKeys() {
    std::vector<CostKey> keys(keys_.size());
    for (const auto& [key, index] : keys_) keys[index] = key;
    return keys;
  }

 private:
  void Layout(int ranks, int dp, int tp, int context) {
    const PlanOptions& o = space_.options;
    if (!o.tensor_parallel.empty() && std::find(o.tensor_parallel.begin(), o.tensor_parallel.end(), tp) ==
                                          o.tensor_parallel.end()) {
      return;  // outside the space asked for
    }
    ++result_->layouts;
    const auto reject = [&](PlanReject why) { ++result_->layouts_rejected[static_cast<int>(why)]; };
    if (!TensorFits(space_.base, tp)) return reject(PlanReject::kTopology);
    if (o.global_batch % dp != 0) return reject(PlanReject::kBatch);
    if (ranks > space_.layers) return reject(PlanReject::kShape);
    auto known = sizes_.find(o.global_batch / dp);  // layouts of one D share it (a search of up to 2^24 steps)
    if (known == sizes_.end()) known = sizes_.emplace(o.global_batch / dp, MicrobatchSizes(space_, o.global_batch / dp)).first;
    const std::vector<int>& sizes = known->second;
    if (sizes.empty()) return reject(PlanReject::kBatch);
    std::vector<int> zeros = o.zero.empty() ? std::vector<int>{0, 1} : o.zero;
    if (dp * context == 1) std::erase_if(zeros, [](int z) { return z >= 1; });  // one replica: nothing to shard
    // Mixture-of-experts layers: each E that divides the experts and D x C x T, and sequence
    // parallelism with T > 1 (Megatron-LM's rule, sim::Validate).
    const sim::TransformerSpec* t = space_.base.model.transformer ? &*space_.base.model.transformer : nullptr;
    const bool moe = t != nullptr && t->moe.has_value();
    // Several device kinds: the stages across the groups, or each replica's pipeline in one.
    using sim::Axis;
    std::vector<std::vector<Axis>> orders = {{}};
    if (space_.base.topology.grouped() && dp > 1 && ranks > 1) {
      orders = {{Axis::kTensor, Axis::kData, Axis::kPipeline}, {Axis::kTensor, Axis::kPipeline, Axis::kData}};
    }
    struct Variant {
      const std::vector<Axis>* order;
      int e, b;
    };
    std::vector<Variant> shapes;
    for (const std::vector<Axis>& order : orders) {
      for (const int64_t e : Divisors(int64_t{dp} * context * tp)) {
        if (e > 1 && !(moe && t->moe->experts % e == 0)) continue;
        if (moe && t->moe->load_imbalance > sim::MostLoadImbalance(*t->moe, static_cast<int>(e))) continue;
        for (const int b : sizes) shapes.push_back({&order, static_cast<int>(e), b});
      }
    }
    for (const auto& [order, e, b] : shapes) {
      PlanConfig c;
      c.placement = *order;
      c.ranks = ranks;
      c.data_parallel = dp;
      c.tensor_parallel = tp;
      c.context_parallel = context;
      c.expert_parallel = e;
      c.sequence_parallel = (space_.base.pipeline.sequence_parallel || moe) && tp > 1;
      c.microbatch_size = b;
      const int64_t microbatches = o.global_batch / dp / b;  // up to 2^48 (CheckInputs)
      if (microbatches > sim::kMaxMicrobatches) {  // past the scenario's limit, and any --max-ops
        for (const GeneratorInfo* info : space_.generators) {
          const int64_t variants = static_cast<int64_t>(space_.recompute.size() * zeros.size()) *
                                   static_cast<int64_t>(
                                       ChunksFor(*info, ranks, space_.layers, o.max_chunks).size());
          result_->enumerated += variants;
          result_->rejected[static_cast<int>(PlanReject::kTooLarge)] += variants;
        }
        continue;
      }
      c.microbatches = static_cast<int>(microbatches);
      for (const GeneratorInfo* info : space_.generators) Schedule(c, *info, zeros);
    }
  }

  void Schedule(PlanConfig c, const GeneratorInfo& info, const std::vector<int>& zeros) {
    // Unless named, a schedule for expert parallelism only where there are all-to-alls.
    if (info.for_expert_parallel && c.expert_parallel == 1 && space_.options.schedules.empty()) return;
    c.schedule = std::string(info.name);
    const int replicas = c.data_parallel * c.context_parallel;
    std::vector<int> chunks = ChunksFor(info, c.ranks, space_.layers, space_.options.max_chunks);
    const int64_t variants = static_cast<int64_t>(space_.recompute.size() * zeros.size());
    if (chunks.empty()) {  // interleaved with no v that divides the layers
      result_->enumerated += variants;
      result_->rejected[static_cast<int>(PlanReject::kShape)] += variants;
      return;
    }
    for (const int v : chunks) {
      c.chunks = v;
      schedules::GeneratorParams params;
      params.ranks = c.ranks;
      params.microbatches = c.microbatches;
      params.chunks = v;
      params.steps = space_.base.pipeline.steps;
      params.data_parallel = replicas;  // the REDUCE_GRAD's group, D x C (ParallelLayout::replicas)
      if (!schedules::CheckParams(info, params).empty() || int64_t{c.ranks} * v > space_.layers) {
        result_->enumerated += variants;
        result_->rejected[static_cast<int>(PlanReject::kShape)] += variants;
        continue;
      }
      const double ops = schedules::EstimateSize(info, params).ops;
      if (ops > static_cast<double>(max_ops_)) {  // refused before anything is built, as simulate refuses it
        result_->enumerated += variants;
        result_->rejected[static_cast<int>(PlanReject::kTooLarge)] += variants;
        continue;
      }
      for (const RecomputeChoice& rc : space_.recompute) {
        c.recompute = rc.kind;
        c.recompute_modules = rc.modules;
        for (const int z : zeros) {
          c.zero = z;
          Partitions(c, info, ops);
        }
      }
    }
  }

  void Partitions(PlanConfig c, const GeneratorInfo& info, double ops) {
    const PlanOptions& o = space_.options;
    const std::vector<sim::Partition> asked =
        o.partitions.empty() ? std::vector<sim::Partition>{sim::Partition::kEven, sim::Partition::kBalanced} : o.partitions;
    for (const sim::Partition part : asked) {
      c.partition = part;
      if (part == sim::Partition::kBalanced && o.partitions.empty() &&
          !partitions_.Differs(ScenarioFor(space_.base, c, o), c.chunks)) {
        continue;  // the even split again
      }
      ++result_->enumerated;
      const CostKey key{c.ranks,       c.chunks,  c.data_parallel, c.tensor_parallel, c.context_parallel, c.expert_parallel,
                        c.microbatch_size, c.zero, c.placement, info.placement, c.recompute, c.recompute_modules.Names(), c.partition,
                        c.sequence_parallel,
                        schedules::PolicyInfo(info.weights).update_per_microbatch};
      const auto [it, added] = keys_.try_emplace(key, static_cast<int>(keys_.size()));
      candidates_.push_back({c, &info, it->second, 0, ops});
      result_->space_ops += ops;
    }
  }

  const Space& space_;
  PlanResult* result_;
  int64_t max_ops_;
  std::map<int64_t, std::vector<int>> sizes_;  // a replica's share of the batch -> its microbatch sizes
  PartitionCache partitions_;
  std::map<CostKey, int> keys_;
  std::vector<Candidate> candidates_;
};

}  // namespace

std::vector<Candidate> Enumerate(const Space& space, PlanResult* result, std::vector<CostKey>* keys) {
  Enumerator enumerator(space, result);
  std::vector<Candidate> candidates = enumerator.Run();
  *keys = enumerator.TakeKeys();
  return candidates;
}

}  // namespace stagecraft::harness::detail
