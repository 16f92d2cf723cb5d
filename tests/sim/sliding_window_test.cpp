// Sliding-window attention (model.transformer.sliding_window; Mistral 7B, Gemma 2 and 3,
// GPT-OSS): the keys a query sees on average against a direct count, a tiny block's fused kernel
// and analytical FLOPs worked by hand, the model-FLOP count, the roofline's stages as the sum of
// their layers' kinds, and bad values one line at their key.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "sim_test_util.h"
#include "stagecraft/sim/cost_models.h"
#include "stagecraft/sim/gpt_kernels.h"
#include "stagecraft/sim/roofline.h"

namespace stagecraft::sim {
namespace {

using testing::ErrorOf;

// Query i of a causal sequence sees keys 0..i, within a window of W the last min(i + 1, W) of
// them: the mean over the queries, counted one by one.
double CountedMean(int seq, int window) {
  double keys = 0;
  for (int i = 0; i < seq; ++i) keys += window > 0 ? std::min(i + 1, window) : i + 1;
  return keys / seq;
}

TEST(SlidingWindow, KeysPerQueryAreTheCountedMean) {
  for (const int seq : {1, 2, 7, 64, 4096}) {
    for (const int window : {1, 2, 5, 128, 4095}) {
      if (window >= seq) continue;
      EXPECT_NEAR(CausalKeysPerQuery(seq, window), CountedMean(seq, window), 1e-9) << seq << " " << window;
    }
  }
  // No window, or one as long as the sequence: the causal half the fused kernel is timed at (the
  // counted mean is (s + 1) / 2; the model keeps s / 2, as it did before windows).
  EXPECT_DOUBLE_EQ(CausalKeysPerQuery(4096, 0), 2048);
  EXPECT_DOUBLE_EQ(CausalKeysPerQuery(4096, 4096), 2048);
  EXPECT_DOUBLE_EQ(CausalKeysPerQuery(4096, 10000), 2048);
}

// b = 1, s = 8, h = 8, a = 2 (heads of 4): the fused kernel's F is two matmuls over s x n scores
// of each head, 2·8·n·(4 + 4)·2 FLOPs: n = 4 (the causal half) whole, and with a window of 2 the
// mean 2 - 2·1/16 = 1.875 keys, rounded to 2 whole ones: 512 in place of 1024 (its I's five
// matmuls likewise, 2·8·n·(3·4 + 2·4)·2: 1280 in place of 2560).
TEST(SlidingWindow, FusedKernelRunsOverTheWindow) {
  GptKernelShape g;
  g.microbatch = 1, g.seq = 8, g.hidden = 8, g.heads = 2, g.vocab = 10;
  g.flash = true;
  const auto flops = [](const GptKernelShape& shape, const std::string& name) {
    double sum = 0;
    for (const Kernel& k : GptBlockKernels(shape)) sum += k.name == name ? k.flops : 0;
    return sum;
  };
  EXPECT_DOUBLE_EQ(flops(g, "flash_attention"), 1024);
  EXPECT_DOUBLE_EQ(flops(g, "flash_attention.dX"), 2560);
  g.window = 2;
  EXPECT_DOUBLE_EQ(flops(g, "flash_attention"), 512);
  EXPECT_DOUBLE_EQ(flops(g, "flash_attention.dX"), 1280);
}

// The analytical model (one FLOP per ns) on flash_attention_test's block: b = 1, s = 4, h = 8,
// a = 2, GELU of 32; a fused layer's forward is 512 + 1024 a token for its projections and
// feed-forward plus 2·(s/2)·(q + o) = 64 for its scores, 1600. A window of 2: 2·(2 - 2/8)·16 =
// 56, 1592 a token. With full_every 2, layer 0 is windowed, layer 1 attends to its whole past:
// 4 tokens x (1592 + 1600) and the LM head 2bshV = 640. Model FLOPs a token count the whole
// square, 6·(q + o)·s a layer, and the window's keys in a windowed one: 6·16·(4 - 2) = 192 fewer.
TEST(SlidingWindow, AnalyticalCostsByHand) {
  Scenario s = testing::UnitScenario(1, "gpipe", 1);
  s.model.transformer = TransformerSpec{2, 8, 2, 4, 10};
  s.model.transformer->attention = AttentionKernel::kFlash;
  s.training.dtype = Dtype::kBf16;
  const double whole = TransformerModelFlopsPerToken(*s.model.transformer);
  EXPECT_EQ(BuildCosts(s, 1).stages[0].forward_ns, 4 * (1600 + 1600) + 640);
  s.model.transformer->window = WindowSpec{.size = 2, .full_every = 2};
  const CostTable windowed = BuildCosts(s, 1);
  EXPECT_EQ(windowed.stages[0].forward_ns, 4 * (1592 + 1600) + 640);
  EXPECT_EQ(windowed.stages[0].backward_weight_ns, windowed.stages[0].forward_ns);  // W: the forward's FLOPs
  EXPECT_DOUBLE_EQ(TransformerModelFlopsPerToken(*s.model.transformer), whole - 192);
  // Two stages of one layer each: the windowed one (layer 0) does less than the other.
  Scenario two = s;
  two.pipeline.ranks = 2;
  const CostTable split = BuildCosts(two, 2);
  EXPECT_EQ(split.stages[0].forward_ns, 4 * 1592);
  EXPECT_EQ(split.stages[1].forward_ns, 4 * 1600 + 640);
}

TEST(SlidingWindow, LayersAlternateAsFullEverySays) {
  TransformerSpec t{12, 8, 2, 4, 10};
  t.window = WindowSpec{.size = 2, .full_every = 0};
  EXPECT_EQ(t.WindowedLayersIn(0, 12), 12);
  t.window->full_every = 2;  // GPT-OSS: layers 1, 3, 5, ... (from 0) attend to their whole past
  EXPECT_TRUE(t.IsWindowedLayer(0));
  EXPECT_FALSE(t.IsWindowedLayer(1));
  EXPECT_EQ(t.WindowedLayersIn(0, 12), 6);
  EXPECT_EQ(t.WindowedLayersIn(1, 3), 1);
  t.window->full_every = 6;  // Gemma 3: five local layers to one global
  EXPECT_EQ(t.WindowedLayersIn(0, 12), 10);
  EXPECT_FALSE(t.IsWindowedLayer(5));
  EXPECT_FALSE(t.IsGpt2Block());
}

std::string RooflineYaml(const std::string& window) {
  return "name: window\n"
         "topology: {device: H100-SXM, nodes: 1, devices_per_node: 8, links: [{scope: node, bandwidth: 450GB/s, "
         "latency: 2us}]}\n"
         "model: {transformer: {layers: 8, hidden: 2048, heads: 32, kv_heads: 8, seq: 8192, vocab: 32000, "
         "activation: swiglu, ffn_hidden: 5632, bias: false, dropout: false, attention: flash" +
         window +
         "}}\n"
         "pipeline: {schedule: 1f1b, ranks: 2, microbatches: 4}\n"
         "training: {optimizer: adam, lr: 0.0001, dtype: bf16}\n";
}

// The roofline's stage is the sum of its layers' kinds: with every second layer windowed, each
// stage's F is the unwindowed one's less its windowed layers' difference between the two fused
// kernels (nothing else in a block changes); a window as long as the sequence changes nothing.
TEST(SlidingWindow, RooflineStagesSumTheirLayersKinds) {
  const Scenario none = LoadScenarioFromText(RooflineYaml(""), "w.yaml", {});
  const Scenario windowed =
      LoadScenarioFromText(RooflineYaml(", sliding_window: {size: 512, full_every: 2}"), "w.yaml", {});
  const Scenario long_window = LoadScenarioFromText(RooflineYaml(", sliding_window: {size: 8192}"), "w.yaml", {});
  const auto kernel_ns = [&](const std::string& name, int64_t window) {
    GptKernelShape shape = KernelShapeOf(none);
    shape.window = window;
    double ns = 0;
    for (const TimedKernel& k : TimeKernels(none, 0, none.topology.device, GptBlockKernels(shape))) {
      if (k.kernel.name == name) ns += k.time.ns();
    }
    return ns;
  };
  const double saved_f = kernel_ns("flash_attention", 0) - kernel_ns("flash_attention", 512);
  const double saved_i = kernel_ns("flash_attention.dX", 0) - kernel_ns("flash_attention.dX", 512);
  ASSERT_GT(saved_f, 0);
  const CostTable a = BuildCosts(none, 2), b = BuildCosts(windowed, 2), c = BuildCosts(long_window, 2);
  ASSERT_EQ(windowed.model.transformer->WindowedLayersIn(0, 4), 2);  // four layers a stage, two windowed
  for (int st = 0; st < 2; ++st) {
    EXPECT_NEAR(static_cast<double>(a.stages[st].forward_ns - b.stages[st].forward_ns), 2 * saved_f, 2);
    EXPECT_NEAR(static_cast<double>(a.stages[st].backward_input_ns - b.stages[st].backward_input_ns), 2 * saved_i, 2);
    EXPECT_EQ(a.stages[st].backward_weight_ns, b.stages[st].backward_weight_ns);
    EXPECT_EQ(a.stages[st].activation_bytes, b.stages[st].activation_bytes);  // the fused kernel keeps no scores
    EXPECT_EQ(a.stages[st].forward_ns, c.stages[st].forward_ns);
    EXPECT_EQ(a.stages[st].backward_input_ns, c.stages[st].backward_input_ns);
  }
}

TEST(SlidingWindow, BadValuesAreOneLineAtTheirKey) {
  testing::ScratchDir dir;
  const std::string path = dir.Write(
      "s.yaml", testing::OneNodeTransformerYaml("{layers: 8, hidden: 512, heads: 8, seq: 128, vocab: 1000, "
                                                "attention: flash, sliding_window: {size: 32, full_every: 2}}"));
  const Scenario s = LoadScenario(path, {});
  ASSERT_TRUE(s.model.transformer->window.has_value());
  EXPECT_EQ(s.model.transformer->window->size, 32);
  EXPECT_EQ(s.model.transformer->WindowedLayersIn(0, 8), 4);
  const auto error = [&](const std::string& set) { return ErrorOf([&] { LoadScenario(path, {set}); }); };
  EXPECT_NE(error("model.transformer.attention=unfused")
                .find("model.transformer.sliding_window: needs attention: "
                      "flash"),
            std::string::npos);
  EXPECT_NE(error("model.transformer.sliding_window.size=0").find("model.transformer.sliding_window.size"),
            std::string::npos);
  EXPECT_NE(error("model.transformer.sliding_window.full_every=-1").find("model.transformer.sliding_window.full_every"),
            std::string::npos);
  EXPECT_NE(error("model.transformer.sliding_window.stride=3").find("model.transformer.sliding_window"),
            std::string::npos);
}

}  // namespace
}  // namespace stagecraft::sim
