// The selective recomputes `stagecraft plan` tries (docs/plan.md): the scenario's modules, and
// Megatron-LM's fine-grained recompute for MoE models (its MoE guide's `--recompute-modules
// mla_up_proj layernorm moe_act`, with core_attn where the attention is unfused), and with MoE
// layers the same with the whole MoE layer (`moe`) for its activation: each only where the model
// has what it drops. The sets are worked out by hand from those rules for each model below; what
// the plan reports of each must be what `simulate` gives the scenario with the plan's overrides,
// and a set that drops more never needs more memory nor runs faster at the same layout.
#include <map>
#include <set>
#include <string>

#include <gtest/gtest.h>

#include "../sim/sim_test_util.h"
#include "stagecraft/base/error.h"
#include "stagecraft/harness/plan.h"
#include "stagecraft/harness/predict.h"

namespace stagecraft::harness {
namespace {

// 4 layers of 512 on one node of 4 devices; `extra` goes into model.transformer, `pipeline` into
// the pipeline block.
std::string Dense(const std::string& extra, const std::string& pipeline = "") {
  return R"(name: recompute
topology: {device: {name: d, peak: 100TFLOPS, memory: 16GiB}, nodes: 1, devices_per_node: 4,
           links: [{scope: node, bandwidth: 100GB/s, latency: 2us}]}
model:
  transformer: {layers: 4, hidden: 512, heads: 8, seq: 512, vocab: 1000, dtype: bf16)" +
         extra + R"(}
pipeline: {schedule: 1f1b, ranks: 1, microbatches: 1)" + pipeline + "}\n";
}

// The same with 8 experts of 1024 (top-2) in every layer.
std::string Moe(const std::string& extra, const std::string& pipeline = "") {
  return Dense(", moe: {experts: 8, top_k: 2, expert_hidden: 1024}" + extra, pipeline);
}

PlanOptions Options() {
  PlanOptions o;
  o.gpus = 4;
  o.global_batch = 4;
  o.top = 1000;
  o.threads = 2;
  o.refine = 0;
  o.schedules = {"1f1b"};
  o.tensor_parallel = {1};
  o.partitions = {sim::Partition::kEven};
  o.zero = {0};
  return o;
}

// The recomputes of the plan's entries: "none", "full", or "selective" and its modules' names.
std::set<std::string> Recomputes(const PlanResult& r) {
  std::set<std::string> out;
  for (const PlanEntry& e : r.entries) {
    const PlanConfig& c = e.config;
    out.insert(c.recompute == sim::Recompute::kSelective ? "selective " + c.recompute_modules.Names()
                                                          : std::string(sim::Name(c.recompute)));
  }
  return out;
}

std::set<std::string> PlannedRecomputes(const std::string& text, const PlanOptions& o) {
  const sim::testing::ScratchDir dir;
  return Recomputes(Plan(sim::LoadScenarioForNewLayout(dir.Write("s.yaml", text), {}), o));
}

TEST(PlanRecompute, TriesTheScenariosModulesAndMegatronsFineGrainedSets) {
  // The attention unfused: core_attn drops the scores, and is in every set.
  EXPECT_EQ(PlannedRecomputes(Moe(""), Options()),
            (std::set<std::string>{"none", "full", "selective core_attn", "selective core_attn, layernorm, moe_act",
                                   "selective core_attn, layernorm, moe"}));
  // A fused attention keeps no scores; the scenario's set is the fine-grained one.
  EXPECT_EQ(PlannedRecomputes(Moe(", attention: flash", ", recompute: selective, recompute_modules: [layernorm, moe_act]"),
                              Options()),
            (std::set<std::string>{"none", "full", "selective layernorm, moe_act", "selective layernorm, moe"}));
  // A stated set less what drops nothing here (core_attn with the fused kernel; mlp where every
  // layer is MoE): the fine-grained set again, tried once.
  EXPECT_EQ(PlannedRecomputes(Moe(", attention: flash",
                                  ", recompute: selective, recompute_modules: [core_attn, layernorm, moe_act, mlp]"),
                              Options()),
            (std::set<std::string>{"none", "full", "selective layernorm, moe_act", "selective layernorm, moe"}));
  // MLA: its up-projections too, and its LayerNorm before the downs.
  EXPECT_EQ(PlannedRecomputes(Moe(", attention: flash, bias: false, mla: {q_lora_rank: 128, kv_lora_rank: 64, rope_head_dim: 16}"),
                              Options()),
            (std::set<std::string>{"none", "full", "selective layernorm, mla_up_proj, moe_act",
                                   "selective layernorm, mla_up_proj, moe"}));
}

TEST(PlanRecompute, ADenseModelKeepsWhatItTriedBefore) {
  const std::string dense = Dense("");
  EXPECT_EQ(PlannedRecomputes(dense, Options()), (std::set<std::string>{"none", "full", "selective core_attn"}));
  // A fused attention and no other module: selective would be none's run again, so unasked it is
  // not tried; asked, it is the scenario's.
  const std::string flash = Dense(", attention: flash");
  EXPECT_EQ(PlannedRecomputes(flash, Options()), (std::set<std::string>{"none", "full"}));
  PlanOptions asked = Options();
  asked.recompute = {sim::Recompute::kSelective};
  EXPECT_EQ(PlannedRecomputes(flash, asked), (std::set<std::string>{"selective core_attn"}));
}

TEST(PlanRecompute, EachSetIsWhatSimulateGivesAndDroppingMoreNeverCostsMemory) {
  const sim::testing::ScratchDir dir;
  const std::string path = dir.Write("moe.yaml", Moe(", attention: flash"));
  PlanOptions o = Options();
  o.recompute = {sim::Recompute::kSelective};
  const PlanResult r = Plan(sim::LoadScenarioForNewLayout(path, {}), o);
  // By layout (the description without its recompute), each set's step and peak.
  std::map<std::string, std::map<std::string, const PlanEntry*>> by_layout;
  for (const PlanEntry& e : r.entries) {
    const PlanConfig& c = e.config;
    ASSERT_EQ(c.recompute, sim::Recompute::kSelective);
    const sim::Scenario sc = sim::LoadScenarioForNewLayout(path, ConfigOverrides(c, o));
    EXPECT_EQ(sc.pipeline.recompute_modules, c.recompute_modules) << DescribeConfig(c);
    const sim::Topology topo(sc.topology);
    const Prediction direct = Predict(sc, topo, ScenarioSchedules(sc, sc.pipeline.schedules).front());
    EXPECT_EQ(direct.metrics.makespan_ns, e.metrics.makespan_ns) << DescribeConfig(c);
    PlanConfig layout = c;
    layout.recompute_modules = {};
    by_layout[DescribeConfig(layout)][c.recompute_modules.Names()] = &e;
  }
  ASSERT_FALSE(by_layout.empty());
  for (const auto& [layout, sets] : by_layout) {
    ASSERT_EQ(sets.size(), 2u) << layout;
    const PlanEntry& act = *sets.at("layernorm, moe_act");
    const PlanEntry& whole = *sets.at("layernorm, moe");
    EXPECT_LE(whole.peak_bytes, act.peak_bytes) << layout;
    EXPECT_GE(whole.metrics.makespan_ns, act.metrics.makespan_ns) << layout;
    EXPECT_NE(DescribeConfig(act.config), DescribeConfig(whole.config));
    EXPECT_NE(DescribeConfig(whole.config).find("sel:ln+moe"), std::string::npos) << DescribeConfig(whole.config);
  }
}

TEST(PlanRecompute, SelectiveAskedOfAModelWithoutATransformerIsRefused) {
  const sim::testing::ScratchDir dir;
  const std::string path = dir.Write("mlp.yaml", R"(name: mlp
topology: {device: {name: d, peak: 100TFLOPS, memory: 16GiB}, nodes: 1, devices_per_node: 4,
           links: [{scope: node, bandwidth: 100GB/s, latency: 2us}]}
model: {mlp: {layers: 4, hidden: 64}}
pipeline: {schedule: 1f1b, ranks: 1, microbatches: 1}
)");
  PlanOptions o = Options();
  o.recompute = {sim::Recompute::kSelective};
  try {
    Plan(sim::LoadScenarioForNewLayout(path, {}), o);
    ADD_FAILURE() << "selective recompute planned for an MLP";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("needs model.transformer"), std::string::npos) << e.what();
  }
  o.recompute = {};
  EXPECT_EQ(Recomputes(Plan(sim::LoadScenarioForNewLayout(path, {}), o)), (std::set<std::string>{"none", "full"}));
}

}  // namespace
}  // namespace stagecraft::harness
