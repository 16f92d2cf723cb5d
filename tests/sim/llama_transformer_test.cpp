// The Llama family's model.transformer (issue 56 point 1, DESIGN.md §10): ffn_hidden, activation
// swiglu, kv_heads (grouped-query attention) and tied_embeddings, worked by hand through the
// parameter count, the analytical costs and the roofline's kernel list; GPT-2's block unchanged
// where they are left out; bad values one line at their key.
#include <gtest/gtest.h>

#include <string>

#include "sim_test_util.h"
#include "stagecraft/sim/cost_models.h"
#include "stagecraft/sim/gpt_kernels.h"
#include "stagecraft/sim/scenario_checks.h"

namespace stagecraft::sim {
namespace {

using testing::ErrorOf;

// Llama-3-8B's block (h 4096, 32 heads, 8 key-value heads, SwiGLU of 14336): its weights are
// 4096·6144 (Q, K, V) + 4096² + 3·4096·14336 = 218,103,808, its RMSNorms 2·4096; this layout
// (GPT's) adds the linear layers' biases 6144 + 4096 + 2·14336 + 4096 and LayerNorms' betas
// 8192: 218,163,200. GPT-2's block is 12h² + 13h.
TEST(LlamaTransformer, BlockParameters) {
  TransformerSpec llama{32, 4096, 32, 8192, 128256};
  llama.ffn_hidden = 14336;
  llama.activation = FfnActivation::kSwiglu;
  llama.kv_heads = 8;
  EXPECT_EQ(TransformerBlockParams(llama), 218'163'200);
  const TransformerSpec gpt{24, 2048, 16, 2048, 51200};
  EXPECT_EQ(TransformerBlockParams(gpt), 12LL * 2048 * 2048 + 13 * 2048);
  EXPECT_EQ(TransformerBlockParams(gpt), GptBlockParams(2048));
  EXPECT_TRUE(gpt.IsGpt2Block());
  EXPECT_FALSE(llama.IsGpt2Block());
  // bias: false, as Llama has none: the weights and the LayerNorms' 4·4096 only.
  llama.bias = false;
  EXPECT_EQ(TransformerBlockParams(llama), 218'103'808 + 4 * 4096);
  TransformerSpec gpt_without = gpt;
  gpt_without.bias = false;
  EXPECT_EQ(TransformerBlockParams(gpt_without), 12LL * 2048 * 2048 + 4 * 2048);
  EXPECT_FALSE(gpt_without.IsGpt2Block());  // the executor's block has biases
}

// b = 2, s = 4, h = 8, a = 2, kv = 1 (g = 1/2, keys 4 wide), f = 12, SwiGLU, V = 10, bf16, one FLOP
// per ns. Per layer and microbatch (8 tokens):
//   forward FLOPs: QKV 2·8·8·16 = 2048, scores and context 2·(2·2·4·4·4) = 1024, projection
//     2·8·8·8 = 1024, gate and up 2·8·8·24 = 3072, down 2·8·12·8 = 1536: 8704
//   params 8·16 + 16 + 64 + 8 + 2·(96 + 12) + 96 + 8 + 32 = 568
//   activations (16-bit): sbh = 64; replicated 10, split 2 + 4g + 2 + 6·f/h = 15: 25·64 + 5·2·16·2 = 1920
//   w_stash (3 + f/h)·64·2 = 576
Scenario TinyLlama() {
  Scenario s = testing::UnitScenario(2, "gpipe", 2);
  s.model.transformer = TransformerSpec{4, 8, 2, 4, 10};
  s.model.transformer->ffn_hidden = 12;
  s.model.transformer->activation = FfnActivation::kSwiglu;
  s.model.transformer->kv_heads = 1;
  s.training.dtype = Dtype::kBf16;
  return s;
}

TEST(LlamaTransformer, AnalyticalCostsByHand) {
  const CostTable t = BuildCosts(TinyLlama(), 2);
  const StageCost& first = t.stages[0];
  EXPECT_EQ(first.forward_ns, 2 * 8704);
  EXPECT_EQ(first.backward_weight_ns, 2 * 8704);
  EXPECT_EQ(first.weight_bytes, (2 * 568 + 112) * 2);  // embeddings (10 + 4)·8 on the first stage
  EXPECT_EQ(first.activation_bytes, 2 * 1920);
  EXPECT_EQ(first.w_stash_bytes, 2 * 576);
  const StageCost& last = t.stages[1];
  EXPECT_EQ(last.forward_ns, 2 * 8704 + 1280);  // the LM head 2·2·4·8·10
  EXPECT_EQ(last.weight_bytes, (2 * 568 + 96) * 2);  // its own copy of the head, tied or not
  Scenario tied = TinyLlama();
  tied.model.transformer->tied_embeddings = true;
  EXPECT_EQ(BuildCosts(tied, 2).stages[1].weight_bytes, (2 * 568 + 96) * 2);
  tied.pipeline.ranks = 1;
  // One stage holds both: the head is the embedding; the final LayerNorm's 2·8 stays.
  EXPECT_EQ(BuildCosts(tied, 1).stages[0].weight_bytes, (4 * 568 + 112 + 16) * 2);
}

// The roofline's kernel list adds up to the same FLOPs: the forward's GEMMs 8704; the weight
// gradients repeat every GEMM with weights (all but scores and context: 7680).
TEST(LlamaTransformer, KernelListFlops) {
  GptKernelShape g;
  g.microbatch = 2, g.seq = 4, g.hidden = 8, g.heads = 2, g.vocab = 10;
  g.ffn = 12, g.swiglu = true, g.kv_heads = 1;
  double forward = 0, weight = 0;
  bool swiglu = false, gelu = false;
  for (const Kernel& k : GptBlockKernels(g)) {
    const bool gemm = k.kind == KernelClass::kGemm || k.kind == KernelClass::kBatchedGemm;
    if (gemm && k.pass == KernelPass::kF) forward += k.flops;
    if (gemm && k.pass == KernelPass::kW) weight += k.flops;
    swiglu |= k.name == "bias_swiglu";
    gelu |= k.name == "bias_gelu";
  }
  EXPECT_DOUBLE_EQ(forward, 8704);
  EXPECT_DOUBLE_EQ(weight, 7680);
  EXPECT_TRUE(swiglu);
  EXPECT_FALSE(gelu);
}

// Without biases the kernel list drops the qkv bias add and every bias gradient (.db), keeps the
// GEMMs' FLOPs, and the tensor-parallel stage replicates only its LayerNorms: the tiny Llama's
// 568 parameters a layer lose 16 + 8 (Q, K, V and the projection's biases) + 24 + 8 (the
// feed-forward's): 512; over T = 2, (512 - 32) / 2 + 32 = 272 on each device.
TEST(LlamaTransformer, WithoutBiases) {
  GptKernelShape g;
  g.microbatch = 2, g.seq = 4, g.hidden = 8, g.heads = 2, g.vocab = 10;
  g.ffn = 12, g.swiglu = true, g.kv_heads = 1, g.bias = false;
  double forward = 0;
  int biases = 0;
  for (const Kernel& k : GptBlockKernels(g)) {
    const bool gemm = k.kind == KernelClass::kGemm || k.kind == KernelClass::kBatchedGemm;
    if (gemm && k.pass == KernelPass::kF) forward += k.flops;
    biases += k.name == "qkv.bias" || k.name.ends_with(".db") ? 1 : 0;
  }
  EXPECT_DOUBLE_EQ(forward, 8704);
  EXPECT_EQ(biases, 0);
  g.bias = true;
  int with = 0;
  for (const Kernel& k : GptBlockKernels(g)) with += k.name == "qkv.bias" || k.name.ends_with(".db") ? 1 : 0;
  EXPECT_EQ(with, 5);  // qkv.bias and the four .db
  Scenario s = TinyLlama();
  s.model.transformer->bias = false;
  EXPECT_EQ(BuildCosts(s, 2).stages[0].weight_bytes, (2 * 512 + 112) * 2);
  s.model.transformer->heads = 2, s.model.transformer->kv_heads = 2;  // T = 2 divides the kv heads
  s.pipeline.tensor_parallel = 2;
  s.pipeline.sequence_parallel = true;
  TransformerSpec wide = *s.model.transformer;
  const int64_t layer = TransformerBlockParams(wide);  // 8·24 + 64 + 2·96 + 96 + 32 = 576
  EXPECT_EQ(layer, 576);
  const int64_t per_device = (layer - 32) / 2 + 32;
  EXPECT_EQ(BuildCosts(s, 2).stages[1].weight_bytes, (2 * per_device + (10 * 8 / 2 + 2 * 8)) * 2);
}

TEST(LlamaTransformer, BadValuesAreOneLineAtTheirKey) {
  testing::ScratchDir dir;
  const std::string path = dir.Write("s.yaml", testing::OneNodeTransformerYaml(
                                                   "{layers: 8, hidden: 512, heads: 8, seq: 128, vocab: 1000, "
                                                   "kv_heads: 2, ffn_hidden: 1536, activation: swiglu}"));
  const Scenario s = LoadScenario(path, {});
  EXPECT_EQ(s.model.transformer->KvHeads(), 2);
  EXPECT_EQ(s.model.transformer->Ffn(), 1536);
  EXPECT_EQ(s.model.transformer->activation, FfnActivation::kSwiglu);
  const auto error = [&](const std::string& set) { return ErrorOf([&] { LoadScenario(path, {set}); }); };
  EXPECT_NE(error("model.transformer.kv_heads=3").find("model.transformer.kv_heads: expected kv_heads to divide "
                                                       "heads (8): each key-value head serves a group of query heads, "
                                                       "got 3"),
            std::string::npos);
  EXPECT_NE(error("model.transformer.activation=relu").find("expected one of gelu, swiglu, got 'relu'"),
            std::string::npos);
  EXPECT_NE(error("pipeline.tensor_parallel=4").find("must divide model.transformer's kv_heads (2)"), std::string::npos);
}

}  // namespace
}  // namespace stagecraft::sim
