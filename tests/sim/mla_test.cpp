// Multi-head latent attention (model.transformer.mla; DeepSeek-V2 and V3): DeepSeek-V3's
// parameter counts against its technical report's, a tiny MLA block worked by hand through the
// analytical costs and the roofline's kernel list, the latents replicated over a tensor group,
// and bad values one line at their key.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "sim_test_util.h"
#include "stagecraft/sim/cost_models.h"
#include "stagecraft/sim/gpt_kernels.h"
#include "stagecraft/sim/scenario_checks.h"

namespace stagecraft::sim {
namespace {

using testing::ErrorOf;

// DeepSeek-V3 (DeepSeek-AI, "DeepSeek-V3 Technical Report", 2024, §4.2: "671B total parameters,
// of which 37B are activated for each token"; the configuration's dimensions): 61 layers of 7168,
// 128 heads, MLA with a query latent of 1536, a key-value latent of 512, heads of 128 plus 64
// rotary, values of 128; the first 3 layers dense (SwiGLU of 18432), then 256 routed experts of
// 2048, top-8, and one shared; a 129,280-token vocabulary, untied; no biases. One layer's MLA:
// 7168·1536 + 1536 + 1536·128·192 + 7168·576 + 512 + 512·128·256 + 128·128·7168 = 187,107,328.
TEST(Mla, DeepSeekV3ParametersMatchTheReport) {
  TransformerSpec t{61, 7168, 128, 4096, 129280};
  t.ffn_hidden = 18432, t.activation = FfnActivation::kSwiglu, t.bias = false, t.head_dim = 128;
  t.mla = MlaSpec{.q_lora_rank = 1536, .kv_lora_rank = 512, .rope_head_dim = 64, .v_head_dim = 128};
  t.moe = MoeSpec{.experts = 256, .top_k = 8, .expert_hidden = 2048, .shared_experts = 1, .first_dense = 3};
  EXPECT_EQ(AttentionParams(t), 187'107'328);
  EXPECT_EQ(MlaReplicatedParams(t), 7168LL * 1536 + 1536 + 7168 * 576 + 512);
  EXPECT_EQ(t.QWidth(), 128 * 192);
  EXPECT_EQ(t.OWidth(), 128 * 128);
  const double head = 129280.0 * 7168;  // the LM head; the token embedding as large again
  const double total = 3.0 * static_cast<double>(TransformerBlockParams(t)) +
                       58.0 * static_cast<double>(MoeBlockParams(t)) + 2 * head;
  // Activated: what a token's matmuls use (the embedding is a lookup), to the report's 37B rounding.
  const double active = 3.0 * static_cast<double>(TransformerBlockParams(t)) +
                        58.0 * static_cast<double>(ActiveMoeBlockParams(t)) + head;
  EXPECT_NEAR(total / 671e9, 1.0, 0.001);
  EXPECT_NEAR(active / 37e9, 1.0, 0.5 / 37);
  EXPECT_FALSE(t.IsGpt2Block());
}

// b = 2, s = 4, h = 8, a = 2, heads of 4 + 2 rotary (qkd 6, q = 12), values of 3 (o = 6), latents
// r_q = r_kv = 4, GELU of 32, no biases, V = 10, bf16, one FLOP per ns. Per layer and microbatch
// (8 tokens):
//   forward FLOPs: q_down 2·8·4·8 = 512, q_up 2·8·12·4 = 768, kv_down 2·8·6·8 = 768, kv_up
//     2·8·14·4 = 896, projection 2·8·8·6 = 768 (3712: 2 x (240 - 8) a token); scores and context
//     2·s·(q + o) a token, 2·4·18·8 = 1152; fc and fc2 2·2·8·8·32 = 8192: 13056
//   params: MLA 32 + 4 + 48 + 4 + 48 + 56 + 48 = 240, GELU 2·8·32 = 512, LayerNorms 32: 784
//   activations (16-bit): sbh = 64; replicated 10, split Q and K 4·12/8 + V and the projection's
//     input 4·6/8 + GELU's 16 = 25, latents (4·4 + 4·4 + 2·2)/8 = 4.5; + 5·a·s²·b = 320:
//     39.5·64 + 320 = 2848
//   w_stash (1 + 6/8 + 1 + 32/8 + (4 + 4)/8)·64·2 = 992
Scenario TinyMla() {
  Scenario s = testing::UnitScenario(2, "gpipe", 2);
  s.model.transformer = TransformerSpec{2, 8, 2, 4, 10};
  s.model.transformer->head_dim = 4;
  s.model.transformer->bias = false;
  s.model.transformer->mla = MlaSpec{.q_lora_rank = 4, .kv_lora_rank = 4, .rope_head_dim = 2, .v_head_dim = 3};
  s.training.dtype = Dtype::kBf16;
  return s;
}

TEST(Mla, AnalyticalCostsByHand) {
  const TransformerSpec& t = *TinyMla().model.transformer;
  EXPECT_EQ(AttentionParams(t), 240);
  EXPECT_EQ(TransformerBlockParams(t), 784);
  const CostTable table = BuildCosts(TinyMla(), 2);
  const StageCost& first = table.stages[0];
  EXPECT_EQ(first.forward_ns, 13056);
  EXPECT_EQ(first.backward_weight_ns, 13056);
  EXPECT_EQ(first.weight_bytes, (784 + 112) * 2);  // + the embeddings (10 + 4)·8
  EXPECT_EQ(first.activation_bytes, 2848);
  EXPECT_EQ(first.w_stash_bytes, 992);
  // Model FLOPs a token: 6 x (the 2 layers' parameters + the head's 80) + 6·L·(q + o)·s.
  EXPECT_DOUBLE_EQ(TransformerModelFlopsPerToken(t), 6.0 * (2 * 784 + 80) + 6.0 * 2 * 18 * 4);
}

// The roofline's kernel list: the same forward FLOPs (unfused and fused attention), the MLA
// kernels in F, I and W, and every weight's gradient once (all GEMMs but the scores' and the
// context's: 2 x 232 a token, 8 tokens, + the feed-forward's 4096).
TEST(Mla, KernelListFlops) {
  GptKernelShape g;
  g.microbatch = 2, g.seq = 4, g.hidden = 8, g.heads = 2, g.vocab = 10, g.head_dim = 4, g.bias = false;
  g.mla = true, g.q_lora = 4, g.kv_lora = 4, g.rope_head_dim = 2, g.v_head_dim = 3;
  const auto sums = [](const GptKernelShape& shape) {
    double forward = 0, weight = 0;
    std::string names;
    for (const Kernel& k : GptBlockKernels(shape)) {
      const bool gemm = k.kind == KernelClass::kGemm || k.kind == KernelClass::kBatchedGemm;
      if (gemm && k.pass == KernelPass::kF) forward += k.flops;
      if (gemm && k.pass == KernelPass::kW) weight += k.flops;
      names += k.name + " ";
    }
    return std::tuple{forward, weight, names};
  };
  const auto [forward, weight, names] = sums(g);
  EXPECT_DOUBLE_EQ(forward, 13056);
  EXPECT_DOUBLE_EQ(weight, 3712 + 8192);
  for (const char* name : {"q_down ", "q_norm ", "q_up ", "kv_down ", "kv_norm ", "kv_up ", "mla_rope ",
                           "q_down.dX ", "kv_up.dX ", "q_norm.dgamma ", "kv_down.dW "}) {
    EXPECT_NE(names.find(name), std::string::npos) << name;
  }
  EXPECT_EQ(names.find("qkv"), std::string::npos);
  g.flash = true;  // the causal half of the scores: s·(q + o) a token, 576 in all
  EXPECT_DOUBLE_EQ(std::get<0>(sums(g)), 13056 - 576);
  g.q_lora = 0;  // one projection of the queries, 2·8·12·8 = 1536 in place of 512 + 768
  EXPECT_DOUBLE_EQ(std::get<0>(sums(g)), 13056 - 576 - 1280 + 1536);
  EXPECT_NE(std::get<2>(sums(g)).find("q.dW "), std::string::npos);
}

// Over a tensor group of 2 the ups and the projection are split by heads, the downs and their
// RMSNorms are every device's own: a layer's 784 parameters hold 4·8 + 4 + 6·8 + 4 = 88 of those
// with the LayerNorms' 32, so each device keeps (784 - 120) / 2 + 120 = 452. With sequence
// parallelism (Megatron-LM's) the downs run on the device's 4 of the 8 rows and their latents,
// 8 rows of r_q + r_kv + rope = 10 in bf16 (160 bytes), are all-gathered into the ups and their
// gradients reduce-scattered back: every FLOP split, 13056 / 2 = 6528 (W: no collective in it);
// the latents kept halved too: activations 64·4.5 / 2 + 64 / 2·(35 + 5·2·4/8) = 1424, W stash
// (6.75 + 1) / 2 · 64 · 2 = 496. Without it each device runs the downs' 2·8·(4 + 4 + 2) = 160
// FLOPs a token on all 8 rows: (13056 - 8·160) / 2 + 8·160 = 7168, and all-reduces the
// latents' gradients.
TEST(Mla, TensorParallelismAsMegatronSplitsIt) {
  Scenario s = TinyMla();
  s.pipeline.tensor_parallel = 2;
  s.pipeline.sequence_parallel = true;
  const StageCost sp = BuildCosts(s, 2).stages[0];
  EXPECT_EQ(sp.weight_bytes, (452 + (10 * 8 / 2 + 4 * 8)) * 2);
  EXPECT_EQ(sp.backward_weight_ns, 6528);
  EXPECT_EQ(sp.activation_bytes, 1424);
  EXPECT_EQ(sp.w_stash_bytes, 496);
  s.pipeline.sequence_parallel = false;
  EXPECT_EQ(BuildCosts(s, 2).stages[0].backward_weight_ns, 7168);
  GptKernelShape g;
  g.microbatch = 2, g.seq = 4, g.hidden = 8, g.heads = 2, g.vocab = 10, g.head_dim = 4, g.bias = false;
  g.mla = true, g.q_lora = 4, g.kv_lora = 4, g.rope_head_dim = 2, g.v_head_dim = 3;
  g.tensor_parallel = 2;
  for (const bool sequence_parallel : {true, false}) {
    g.sequence_parallel = sequence_parallel;
    std::map<std::string, Kernel> by_name;
    for (const Kernel& k : GptBlockKernels(g)) by_name.emplace(k.name, k);
    EXPECT_EQ(by_name.at("q_down").m, sequence_parallel ? 4 : 8);
    EXPECT_EQ(by_name.at("q_down").n, 4);  // whole
    EXPECT_EQ(by_name.at("q_up").m, 8);    // all the rows
    EXPECT_EQ(by_name.at("q_up").n, 6);    // one head of 6
    EXPECT_EQ(by_name.at("kv_down.dW").k, sequence_parallel ? 4 : 8);
    EXPECT_EQ(by_name.count("attention.all_gather"), 0U);  // a query latent: no h-wide gather
    if (sequence_parallel) {
      EXPECT_DOUBLE_EQ(by_name.at("attention.latent.all_gather").bytes, 160);
      EXPECT_DOUBLE_EQ(by_name.at("attention.latent.dX.reduce_scatter").bytes, 160);
    } else {
      EXPECT_EQ(by_name.count("attention.latent.all_gather"), 0U);
      EXPECT_DOUBLE_EQ(by_name.at("attention.latent.dX.all_reduce").bytes, 160);
    }
  }
}

TEST(Mla, BadValuesAreOneLineAtTheirKey) {
  testing::ScratchDir dir;
  const std::string path = dir.Write("s.yaml", testing::OneNodeTransformerYaml(
                                                   "{layers: 8, hidden: 512, heads: 8, seq: 128, vocab: 1000, "
                                                   "bias: false, head_dim: 64, mla: {q_lora_rank: 128, "
                                                   "kv_lora_rank: 64, rope_head_dim: 32}}"));
  const Scenario s = LoadScenario(path, {});
  ASSERT_TRUE(s.model.transformer->mla.has_value());
  EXPECT_EQ(s.model.transformer->mla->kv_lora_rank, 64);
  EXPECT_EQ(s.model.transformer->QkHeadDim(), 96);
  EXPECT_EQ(s.model.transformer->VHeadDim(), 64);  // head_dim by default
  const auto error = [&](const std::string& set) { return ErrorOf([&] { LoadScenario(path, {set}); }); };
  EXPECT_NE(error("model.transformer.kv_heads=2").find("model.transformer.kv_heads: expected none with mla"),
            std::string::npos);
  EXPECT_NE(error("model.transformer.bias=true").find("model.transformer.bias: expected false with mla"),
            std::string::npos);
  EXPECT_NE(error("model.transformer.mla.kv_lora_rank=0").find("model.transformer.mla.kv_lora_rank"),
            std::string::npos);
  EXPECT_NE(error("model.transformer.mla.rank=3").find("model.transformer.mla"), std::string::npos);
}

}  // namespace
}  // namespace stagecraft::sim
