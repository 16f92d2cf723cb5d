// pipeline.recompute_modules (recompute.h): Megatron-LM's fine-grained selective recompute. What
// each module repeats in I, kernel by kernel (checked against the forward's own kernels), what it
// drops of the activations and adds to I on a tiny MoE stage worked by hand, the MoE layer's
// all-to-alls run again, and bad input refused at the key.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "sim_test_util.h"
#include "stagecraft/sim/cost_models.h"
#include "stagecraft/sim/gpt_kernels.h"

namespace stagecraft::sim {
namespace {

using M = RecomputeModule;

// name -> kernel, without the "recompute." of a recomputed one.
std::map<std::string, Kernel> Named(const std::vector<Kernel>& kernels, bool strip) {
  std::map<std::string, Kernel> out;
  for (const Kernel& k : kernels) {
    std::string name = k.name;
    if (strip) {
      EXPECT_TRUE(name.starts_with("recompute.")) << name;
      EXPECT_EQ(k.pass, KernelPass::kI) << name;
      name.erase(0, std::string("recompute.").size());
    }
    out.emplace(name, k);
  }
  return out;
}

// Checks that `modules` repeats exactly the forward kernels `expected` of the layer, each as the
// forward runs it.
void ExpectRepeats(const GptKernelShape& g, bool moe_layer, const RecomputeModules& modules,
                   const std::vector<std::string>& expected) {
  std::vector<Kernel> forward;
  for (const Kernel& k : GptBlockKernels(g, moe_layer)) {
    if (k.pass == KernelPass::kF) forward.push_back(k);
  }
  const auto f = Named(forward, false);
  const auto again = Named(GptRecomputeKernels(g, modules, moe_layer), true);
  std::vector<std::string> names;
  for (const auto& [name, k] : again) {
    names.push_back(name);
    ASSERT_TRUE(f.contains(name)) << name;
    EXPECT_DOUBLE_EQ(k.flops, f.at(name).flops) << name;
    EXPECT_DOUBLE_EQ(k.bytes, f.at(name).bytes) << name;
  }
  std::vector<std::string> sorted = expected;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(names, sorted) << modules.Names();
}

// The tiny MoE layer of moe_test's KernelListFlops: b = 1, s = 4, h = 8, a = 2, 4 experts of 6
// (GELU), top-2, 2 local experts.
GptKernelShape TinyMoeShape() {
  GptKernelShape g;
  g.microbatch = 1, g.seq = 4, g.hidden = 8, g.heads = 2, g.vocab = 10;
  g.experts = 4, g.routed = 2, g.local_experts = 2, g.expert_ffn = 6;
  g.deepep = true;  // no chunk sorting
  return g;
}

// Transformer Engine fuses a dense layer's LayerNorms into its GEMMs: `layernorm` repeats nothing
// there, a MoE layer's second LayerNorm (before the router), MLA's first (before its downs).
TEST(RecomputeModules, EachModuleRepeatsItsOwnForwardKernels) {
  GptKernelShape dense = TinyMoeShape();
  dense.experts = 0;
  ExpectRepeats(dense, false, {M::kLayernorm}, {});
  ExpectRepeats(dense, false, {M::kCoreAttn}, {"scores", "softmax", "attention_dropout", "context"});
  ExpectRepeats(dense, false, {M::kMlp}, {"ln2", "fc", "bias_gelu", "fc2"});
  const GptKernelShape moe = TinyMoeShape();
  ExpectRepeats(moe, true, {M::kLayernorm}, {"ln2"});
  ExpectRepeats(moe, true, {M::kMoeAct}, {"expert.bias_gelu"});
  ExpectRepeats(moe, true, {M::kMlp}, {});  // mlp is the dense layers' only
  ExpectRepeats(moe, true, {M::kMoe},
                {"router", "router.topk", "permute", "expert.fc", "expert.bias_gelu", "expert.fc2", "unpermute"});
  GptKernelShape shared = moe;
  shared.shared_ffn = 6;
  shared.swiglu = true;
  ExpectRepeats(shared, true, {M::kSharedExperts}, {"shared.fc", "shared.bias_swiglu", "shared.fc2"});
  ExpectRepeats(shared, true, {M::kMoeAct, M::kLayernorm}, {"expert.bias_swiglu", "ln2"});
  // With tensor parallelism the dense feed-forward's collectives run again with it.
  GptKernelShape tp = dense;
  tp.tensor_parallel = 2, tp.sequence_parallel = true;
  ExpectRepeats(tp, false, {M::kMlp}, {"ln2", "mlp.all_gather", "fc", "bias_gelu", "fc2", "mlp.reduce_scatter"});
  GptKernelShape mla = dense;
  mla.head_dim = 4, mla.bias = false, mla.mla = true, mla.q_lora = 4, mla.kv_lora = 4, mla.rope_head_dim = 2,
  mla.v_head_dim = 3;
  ExpectRepeats(mla, false, {M::kMlaUpProj}, {"q_norm", "kv_norm", "q_up", "kv_up", "mla_rope"});
  ExpectRepeats(mla, false, {M::kLayernorm}, {"ln1"});
  // Full recompute repeats every forward kernel; selective's default is core_attn's.
  const auto forward = GptBlockKernels(moe, true);
  EXPECT_EQ(static_cast<ptrdiff_t>(GptRecomputeKernels(moe, true, true).size()),
            std::count_if(forward.begin(), forward.end(), [](const Kernel& k) { return k.pass == KernelPass::kF; }));
  EXPECT_EQ(Named(GptRecomputeKernels(moe, false, true), true).size(), 4u);
}

// testing::TinyMoeScenario (one FLOP a ns, b = 1, s = 4, h = 8, a = 2, 4 experts of 6 (GELU),
// top-2, E = 2, bf16, one layer a stage). Its MoE layer keeps, in units of s·b·h = 32 bytes: 10
// unsplit, attention 8 (Q 2, K and V 4, the projection's input 2), two routed copies of
// (2 + 4·6/8) = 5, i.e. 28·32 = 896, plus the scores 5·a·s²·b = 160: 1056 bytes. Per module:
//   core_attn drops the scores (160) and repeats their 2·b·s·s·(q + o) = 512 FLOPs;
//   layernorm the router's input 2 (64), repeats no FLOPs; moe_act the activations' outputs
//   2 x 2·6/8 = 3 (96), no FLOPs; moe the routed copies 10 (320) and repeats the router's 256
//   and the experts' 1536 FLOPs and the dispatch and combine.
Scenario TinyMoe(const RecomputeModules& modules) {
  Scenario s = testing::TinyMoeScenario();
  if (!modules.empty()) s.pipeline.recompute = Recompute::kSelective;
  s.pipeline.recompute_modules = modules;
  return s;
}

TEST(RecomputeModules, ActivationsAndBackwardOfATinyMoeStageByHand) {
  const auto first = [](const RecomputeModules& modules) { return BuildCosts(TinyMoe(modules), 2).stages[0]; };
  const StageCost none = first({});
  EXPECT_EQ(none.activation_bytes, 1056);
  EXPECT_EQ(none.backward_input_ns, 4352);
  EXPECT_EQ(none.a2a_backward, 2);
  const StageCost attention = first({M::kCoreAttn});
  EXPECT_EQ(attention.activation_bytes, 1056 - 160);
  EXPECT_EQ(attention.backward_input_ns, 4352 + 512);
  const StageCost norm_act = first({M::kLayernorm, M::kMoeAct});
  EXPECT_EQ(norm_act.activation_bytes, 1056 - 64 - 96);
  EXPECT_EQ(norm_act.backward_input_ns, 4352);
  EXPECT_EQ(norm_act.a2a_backward, 2);
  const StageCost moe = first({M::kMoe});
  EXPECT_EQ(moe.activation_bytes, 1056 - 320);
  EXPECT_EQ(moe.backward_input_ns, 4352 + 256 + 1536);
  EXPECT_EQ(moe.a2a_backward, 4);  // the dispatch and combine again, and their gradients
  // moe already drops what moe_act does: not twice.
  EXPECT_EQ(first({M::kMoe, M::kMoeAct}).activation_bytes, 1056 - 320);
  // The default selective recompute is core_attn's.
  Scenario selective = TinyMoe({});
  selective.pipeline.recompute = Recompute::kSelective;
  EXPECT_EQ(BuildCosts(selective, 2).stages[0].activation_bytes, attention.activation_bytes);
}

// The roofline model charges the same modules: a MoE stage on an H100 recomputing `moe` spends
// in I what its forward spends on the router and the experts, and keeps less.
TEST(RecomputeModules, RooflineRepeatsTheModulesForwardTime) {
  const std::string yaml =
      "name: r\ntopology: {device: H100-SXM, nodes: 1, devices_per_node: 8,\n"
      "  links: [{scope: node, bandwidth: 450GB/s, latency: 2us}]}\n"
      "model: {transformer: {layers: 4, hidden: 1024, heads: 8, seq: 512, vocab: 1000, attention: flash,\n"
      "  moe: {experts: 8, top_k: 2}}}\n"
      "pipeline: {schedule: 1f1b, ranks: 2, microbatches: 4, data_parallel: 4, expert_parallel: 4}\n"
      "training: {optimizer: adam, lr: 0.0001, dtype: bf16}\n";
  const auto stage = [&](const std::vector<std::string>& sets) {
    return BuildCosts(LoadScenarioFromText(yaml, "r.yaml", sets), 2).stages[0];
  };
  const StageCost none = stage({});
  const StageCost act = stage({"pipeline.recompute=selective", "pipeline.recompute_modules=[moe_act]"});
  const StageCost moe = stage({"pipeline.recompute=selective", "pipeline.recompute_modules=[moe]"});
  EXPECT_LT(act.activation_bytes, none.activation_bytes);
  EXPECT_LT(moe.activation_bytes, act.activation_bytes);
  EXPECT_GT(act.backward_input_ns, none.backward_input_ns);
  EXPECT_GT(moe.backward_input_ns, act.backward_input_ns);
  EXPECT_EQ(moe.forward_ns, none.forward_ns);
  EXPECT_EQ(moe.a2a_backward, 2 * none.a2a_backward);
  // With a fused attention kernel core_attn keeps and repeats nothing more.
  const StageCost attention = stage({"pipeline.recompute=selective", "pipeline.recompute_modules=[core_attn]"});
  EXPECT_EQ(attention.activation_bytes, none.activation_bytes);
  EXPECT_EQ(attention.backward_input_ns, none.backward_input_ns);
}

TEST(RecomputeModules, BadListsAreRefusedAtTheKey) {
  const std::string yaml =
      "name: r\ntopology: {device: H100-SXM, nodes: 1, devices_per_node: 8,\n"
      "  links: [{scope: node, bandwidth: 450GB/s, latency: 2us}]}\n"
      "model: {transformer: {layers: 4, hidden: 1024, heads: 8, seq: 512, vocab: 1000}}\n"
      "pipeline: {schedule: 1f1b, ranks: 2, microbatches: 4, recompute: selective}\n"
      "training: {optimizer: adam, lr: 0.0001, dtype: bf16}\n";
  const auto error = [&](const std::vector<std::string>& sets) {
    return testing::ErrorOf([&] { LoadScenarioFromText(yaml, "r.yaml", sets); });
  };
  EXPECT_EQ(error({"pipeline.recompute_modules=[core_attn, mlp]"}), "");
  EXPECT_NE(error({"pipeline.recompute_modules=[mlp, mlp]"}).find("module 'mlp' is listed twice"), std::string::npos);
  EXPECT_NE(error({"pipeline.recompute_modules=[attention]"}).find("core_attn"), std::string::npos);
  EXPECT_NE(error({"pipeline.recompute_modules=[]"})
                .find("expected a list of modules to recompute, e.g. [layernorm, moe_act] (known: core_attn, "
                      "layernorm, mla_up_proj, moe_act, mlp, moe, shared_experts)"),
            std::string::npos);
  // Read only with selective recompute (a what-if's --set pipeline.recompute=none, plan's candidates).
  EXPECT_EQ(error({"pipeline.recompute=full", "pipeline.recompute_modules=[moe_act]"}), "");
  EXPECT_NE(error({"pipeline.recompute_modules=[moe_act]"})
                .find("pipeline.recompute_modules: moe_act recomputes the routed experts' activation "
                      "(model.transformer.moe), which this model has not"),
            std::string::npos);
  EXPECT_NE(error({"pipeline.recompute_modules=[mla_up_proj]"}).find("MLA's up-projections"), std::string::npos);
}

}  // namespace
}  // namespace stagecraft::sim
