// model.transformer's attention, its mixture-of-experts layers and pipeline.expert_parallel
// against the rest of the scenario (validate_detail.h).
#include <algorithm>
#include <functional>
#include <map>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "validate_detail.h"

namespace stagecraft::sim::detail {

void CheckAttention(const Scenario& s, Problems* out) {
  const TransformerSpec* t = s.model.transformer ? &*s.model.transformer : nullptr;
  if (t && t->head_dim == 0 && t->hidden % t->heads != 0) {
    out->Add("model.transformer.heads",
             fmt::format("expected heads to divide hidden ({}), got {}", t->hidden, t->heads));
  }
  if (t && t->mla && t->kv_heads > 0) {
    out->Add("model.transformer.kv_heads", "expected none with mla: MLA's heads each have their own key and value, "
                                           "made from the latent every head shares");
  } else if (t && t->mla && t->bias) {
    out->Add("model.transformer.bias", "expected false with mla: MLA's projections have no biases (DeepSeek-V2, V3)");
  }
  if (t && t->window && t->attention != AttentionKernel::kFlash) {
    out->Add("model.transformer.sliding_window",
             "needs attention: flash: unfused attention computes every score of the causal square and masks "
             "those outside the window, so a window would change nothing it runs");
  }
  if (t && t->heads % t->KvHeads() != 0) {
    out->Add("model.transformer.kv_heads", fmt::format("expected kv_heads to divide heads ({}): each key-value head "
                                                       "serves a group of query heads, got {}",
                                                       t->heads, t->KvHeads()));
  }
}

// training.fp8: the roofline model's linear GEMMs on every device's FP8 peak, over 16-bit tensors.
void CheckFp8(const Scenario& s, Problems* out) {
  if (!s.training.fp8) return;
  if (s.training.fp8_dispatch && !(s.model.transformer && s.model.transformer->moe)) {
    out->Add("training.fp8_dispatch", "sends a MoE layer's tokens to their experts in FP8: the model has no "
                                      "mixture-of-experts layers (model.transformer.moe)");
  }
  if (!s.model.transformer || !s.topology.roofline()) {
    out->Add("training.fp8", "runs the linear layers' GEMMs in FP8 in the roofline model: it needs "
                             "model.transformer and a device with the roofline model's facts (the device library's)");
    return;
  }
  if (DtypeBytes(s.training.dtype) != 2) {
    out->Add("training.fp8", fmt::format("casts 16-bit tensors to FP8 for the linear layers' GEMMs: it needs "
                                         "training.dtype bf16 or fp16, got {}",
                                         Name(s.training.dtype)));
  }
  for (int g = 0; g < s.topology.group_count(); ++g) {
    const DeviceSpec& device = s.topology.GroupDevice(g);
    if (device.peak_by_dtype[static_cast<int>(Dtype::kFp8)] <= 0) {
      out->Add("training.fp8", fmt::format("device {} states no fp8 peak (peak: {{fp8: ...}}): it has no FP8 "
                                           "tensor cores, or its file does not say",
                                           device.name));
    }
  }
}

}  // namespace stagecraft::sim::detail

namespace stagecraft::sim {

namespace {

// The most of a token's top_k routed copies one device of an expert group can take: one for each
// of its experts, experts / E of them.
int MostLocalCopies(const MoeSpec& moe, int expert_parallel) {
  return std::min(moe.top_k, moe.experts / expert_parallel);
}

}  // namespace

double MostLoadImbalance(const MoeSpec& moe, int expert_parallel) {
  if (expert_parallel <= 1) return 1;
  return static_cast<double>(expert_parallel) * MostLocalCopies(moe, expert_parallel) / moe.top_k;
}

std::string ContextParallelProblem(const Scenario& s, int c) {
  if (c <= 1) return "";
  const TransformerSpec* t = s.model.transformer ? &*s.model.transformer : nullptr;
  if (!t || t->attention != AttentionKernel::kFlash) {
    return fmt::format("splits each sequence over devices that {} the keys and values into a fused attention "
                       "kernel: it needs model.transformer with attention: flash",
                       s.pipeline.context_all_gather ? "all-gather" : "pass round a ring");
  }
  if (t->seq % (2 * c) != 0) {
    return fmt::format("must divide the sequence into 2 x {} equal chunks (each device takes one from each end): "
                       "model.transformer.seq {} is not a multiple of {}",
                       c, t->seq, 2 * c);
  }
  return "";
}

}  // namespace stagecraft::sim

namespace stagecraft::sim::detail {

void CheckContext(const Scenario& s, Problems* out) {
  if (std::string why = ContextParallelProblem(s, s.pipeline.context_parallel); !why.empty()) {
    out->Add("pipeline.context_parallel", why);
  }
}

void CheckTransformer(const Scenario& s, Problems* out) {
  CheckAttention(s, out);
  CheckFp8(s, out);
  CheckContext(s, out);
  CheckRecomputeModules(s, out);
  if (const std::optional<Dtype> grads = s.training.grad_dtype) {
    if (!s.model.transformer) {
      out->Add("training.grad_dtype", "sizes the transformer's gradients: it needs model.transformer");
    } else if (*grads != Dtype::kFp32 && *grads != s.training.dtype) {
      out->Add("training.grad_dtype", fmt::format("expected fp32 or the run's dtype ({}), got {}",
                                                  Name(s.training.dtype), Name(*grads)));
    }
  }
  if (s.pipeline.param_gather_overlap && (s.pipeline.zero < 1 || s.pipeline.zero > 2)) {
    out->Add("pipeline.param_gather_overlap", fmt::format("overlaps ZeRO's all-gather of the updated weights with the "
                                                          "next step: it needs pipeline.zero 1 or 2, got {}",
                                                          s.pipeline.zero));
  }
  if (s.pipeline.zero >= 2 && !s.model.transformer) {
    out->Add("pipeline.zero", fmt::format("{} shards the weights' gradients{} layer by layer: it needs "
                                          "model.transformer (the cost models that shard them)",
                                          s.pipeline.zero, s.pipeline.zero >= 3 ? " and the weights" : ""));
  }
}

namespace {

// How the expert groups sit on nodes: DeepEP's even spread, the node limit's room for top_k.
void CheckExpertNodes(const Scenario& s, const MoeSpec& moe, int64_t holders, Problems* out) {
  const PipelineSpec& p = s.pipeline;
  if (p.expert_parallel <= 1 || s.topology.explicit_graph() || p.devices() > s.topology.devices() ||
      holders % p.expert_parallel != 0 || moe.experts % p.expert_parallel != 0) {
    return;
  }
  const std::vector<std::vector<int>> groups = p.ExpertDevices();
  for (const std::vector<int>& group : groups) {
    std::map<int, int> on;  // devices of the group by node
    for (const int d : group) ++on[s.topology.NodeOf(d)];
    std::vector<int> counts;
    for (const auto& [node, n] : on) counts.push_back(n);
    const int n = static_cast<int>(counts.size()), each = moe.experts / n;
    if (p.deepep && std::adjacent_find(counts.begin(), counts.end(), std::not_equal_to<>()) != counts.end()) {
      // DeepEP sends a token once to each node and forwards it there: every node of the group alike.
      out->Add("pipeline.moe_dispatcher",
               fmt::format("deepep forwards the tokens a node receives to its experts over NVLink: it needs each "
                           "expert group's {} devices spread evenly over their nodes, got {} on {} nodes",
                           p.expert_parallel, fmt::join(counts, " + "), n));
      return;
    }
    if (moe.node_limit > 0 && moe.node_limit < n && moe.top_k > moe.node_limit * each) {
      out->Add("model.transformer.moe.node_limit",
               fmt::format("{} nodes of the expert group's {} hold {} x {} experts, fewer than top_k {}: expected at "
                           "least {}, got {}",
                           moe.node_limit, n, moe.node_limit, each, moe.top_k, (moe.top_k + each - 1) / each,
                           moe.node_limit));
      return;
    }
  }
}

}  // namespace

void CheckExperts(const Scenario& s, Problems* out) {
  const PipelineSpec& p = s.pipeline;
  const TransformerSpec* t = s.model.transformer ? &*s.model.transformer : nullptr;
  const MoeSpec* moe = t && t->moe ? &*t->moe : nullptr;
  if (!moe) {
    if (p.expert_parallel > 1) {
      out->Add("pipeline.expert_parallel", "shards the experts of mixture-of-experts layers: it needs "
                                           "model.transformer.moe");
    }
    return;
  }
  if (moe->load_imbalance > 1 && p.expert_parallel <= 1) {
    out->Add("model.transformer.moe.load_imbalance",
             fmt::format("needs pipeline.expert_parallel > 1: a device that holds every expert computes exactly its "
                         "own tokens' routed rows, got {} with no expert parallelism",
                         moe->load_imbalance));
  } else if (moe->load_imbalance > 1 && moe->experts % p.expert_parallel == 0) {
    const int local = MostLocalCopies(*moe, p.expert_parallel);
    const double most = MostLoadImbalance(*moe, p.expert_parallel);
    if (moe->load_imbalance > most) {
      out->Add("model.transformer.moe.load_imbalance",
               fmt::format("expected at most {:g} with pipeline.expert_parallel {}: the busiest device gets at most "
                           "{} of each token's {} routed copies from each of the {} devices, got {:g}",
                           most, p.expert_parallel, local, moe->top_k, p.expert_parallel, moe->load_imbalance));
    }
  }
  if (moe->first_dense >= t->layers) {
    out->Add("model.transformer.moe.first_dense", fmt::format("expected fewer than the {} layers, got {}: no layer "
                                                              "would be a MoE layer",
                                                              t->layers, moe->first_dense));
  }
  const int64_t holders = int64_t{p.replicas()} * p.tensor_parallel;
  if (moe->experts % p.expert_parallel != 0) {
    out->Add("pipeline.expert_parallel", fmt::format("must divide model.transformer.moe.experts ({}): each device "
                                                     "holds an equal share of whole experts, got {}",
                                                     moe->experts, p.expert_parallel));
  } else if (holders % p.expert_parallel != 0) {
    out->Add("pipeline.expert_parallel",
             fmt::format("must divide data_parallel x {}tensor_parallel ({} x {}{} = {}): the experts are sharded "
                         "over the devices that hold a stage (Megatron-LM's convention), got {}",
                         p.context_parallel > 1 ? "context_parallel x " : "", p.data_parallel,
                         p.context_parallel > 1 ? fmt::format("{} x ", p.context_parallel) : "", p.tensor_parallel,
                         holders, p.expert_parallel));
  }
  CheckExpertNodes(s, *moe, holders, out);
  if (p.tensor_parallel > 1 && !p.sequence_parallel) {
    out->Add("pipeline.sequence_parallel", "must be true with mixture-of-experts layers and tensor_parallel > 1: "
                                           "each device routes its own share of the sequence (Megatron-LM's rule)");
  }
  if (moe->shared_experts * t->ExpertFfn() % p.tensor_parallel == 0) return;
  out->Add("pipeline.tensor_parallel",
           fmt::format("must divide the shared experts' width ({} x {}): they are split over the tensor group like "
                       "the dense feed-forward, got {}",
                       moe->shared_experts, t->ExpertFfn(), p.tensor_parallel));
}

// pipeline.recompute_modules: with selective recompute, each module one the model has (without
// it the list is not read, as Megatron-LM reads --recompute-modules only with selective
// granularity: `--set pipeline.recompute=none` and plan's candidates override a scenario's).
void CheckRecomputeModules(const Scenario& s, Problems* out) {
  const PipelineSpec& p = s.pipeline;
  const RecomputeModules& m = p.recompute_modules;
  if (m.empty() || p.recompute != Recompute::kSelective) return;
  const auto& t = s.model.transformer;
  if (!t) return;  // pipeline.recompute says selective needs one
  bool dense = false;
  for (int l = 0; l < t->layers && !dense; ++l) dense = !t->IsMoeLayer(l);
  const auto lacks = [&](RecomputeModule module, bool has, std::string_view what) {
    if (m.Has(module) && !has) {
      out->Add("pipeline.recompute_modules", fmt::format("{} recomputes {}, which this model has not", Name(module), what));
    }
  };
  lacks(RecomputeModule::kMlaUpProj, t->mla.has_value(), "MLA's up-projections (model.transformer.mla)");
  lacks(RecomputeModule::kMoeAct, t->moe.has_value(), "the routed experts' activation (model.transformer.moe)");
  lacks(RecomputeModule::kMoe, t->moe.has_value(), "the MoE layers (model.transformer.moe)");
  lacks(RecomputeModule::kSharedExperts, t->moe && t->moe->shared_experts > 0,
        "the shared experts (model.transformer.moe.shared_experts)");
  lacks(RecomputeModule::kMlp, dense, "the dense layers' feed-forward");
}

}  // namespace stagecraft::sim::detail
