// Tests for scenario/src/validate.cpp (and sim/src/scenario_limits.cpp) on scenarios built in code: every
// problem found at once under its key, the same words the YAML loader locates in a file, the
// natural chunks of the V schedules, and the derived limits once the parts fit.
#include "stagecraft/sim/scenario_checks.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "sim_test_util.h"

namespace stagecraft::sim {
namespace {

using testing::ErrorOf;
using testing::ScratchDir;

// A sound scenario: 4 ranks on a node of 4, explicit costs, 1f1b.
Scenario Sound() {
  Scenario s = testing::UnitScenario(4, "1f1b");
  s.topology.links = {{LinkScope::kNode, 100e9, 2000}};
  ExplicitCosts c;
  c.forward_ns = c.backward_input_ns = c.backward_weight_ns = std::vector<int64_t>(4, 1'000'000);
  c.activation_bytes = c.weight_bytes = std::vector<int64_t>(4, 0);
  s.model.costs = c;
  return s;
}

std::vector<std::string> Keys(const std::vector<ScenarioProblem>& problems) {
  std::vector<std::string> keys;
  for (const ScenarioProblem& p : problems) keys.push_back(p.key);
  return keys;
}

TEST(Validate, ASoundScenarioHasNoProblems) { EXPECT_TRUE(Validate(Sound()).empty()); }

TEST(Validate, EveryProblemAtOnce) {
  Scenario s = Sound();
  s.pipeline.ranks = 8;                        // 4 devices
  s.model.costs->forward_ns.resize(3);         // not one per rank
  s.model.transformer = TransformerSpec{4, 64, 5, 16, 100};  // heads do not divide hidden; 4 layers < 8 stages
  s.model.mlp = MlpSpec{8, 16};                // beside the transformer
  const std::vector<ScenarioProblem> problems = Validate(s);
  EXPECT_EQ(Keys(problems),
            (std::vector<std::string>{"pipeline.ranks", "model.mlp", "model.transformer.heads", "model.costs.forward",
                                      "model.costs.backward_input", "model.costs.backward_weight",
                                      "model.costs.activation_bytes", "model.costs.weight_bytes",
                                      "model.transformer.layers"}));
  EXPECT_EQ(problems[0].message, "topology has 4 devices but pipeline.ranks is 8");
  EXPECT_EQ(problems[1].message, "expected either transformer or mlp, not both");
  EXPECT_EQ(problems[2].message, "expected heads to divide hidden (64), got 5");
  EXPECT_EQ(problems[3].message, "expected 8 entries (one per rank), got 3");
  EXPECT_EQ(problems[8].message,
            "expected at least 8 layers, one per stage (pipeline.ranks x pipeline.chunks), got 4");
  EXPECT_EQ(DescribeProblems(s, {problems[0], problems[1]}),
            "test.yaml: pipeline.ranks: topology has 4 devices but pipeline.ranks is 8; test.yaml: model.mlp: "
            "expected either transformer or mlp, not both");
  const std::string error = ErrorOf([&] { CheckScenario(s); });
  EXPECT_EQ(error, DescribeProblems(s, problems));
}

// Counts a scenario built in code may hold out of range come first, and alone.
TEST(Validate, CountsOutOfRange) {
  Scenario s = Sound();
  s.pipeline.ranks = 0;
  s.pipeline.microbatches = 1 << 25;
  s.topology.device.efficiency = 0;
  const std::vector<ScenarioProblem> problems = Validate(s);
  EXPECT_EQ(Keys(problems), (std::vector<std::string>{"topology.device.efficiency", "pipeline.ranks",
                                                      "pipeline.microbatches"}));
  EXPECT_EQ(problems[1].message, "expected an integer in [1, 65536], got 0");
}

TEST(Validate, Topology) {
  Scenario s = Sound();
  s.topology.nodes = 2;
  s.topology.links.push_back({LinkScope::kNode, 1e9, 0});
  std::vector<ScenarioProblem> problems = Validate(s);
  ASSERT_EQ(Keys(problems), (std::vector<std::string>{"topology.links.1.scope", "topology.links"}));
  EXPECT_EQ(problems[0].message, "a second link with scope 'node'");
  EXPECT_EQ(problems[1].message, "expected a link with scope: cluster (topology has 2 nodes)");

  s = Sound();
  s.pipeline.ranks = 2;
  s.model.costs = ExplicitCosts{{1, 1}, {1, 1}, {1, 1}, {0, 0}, {0, 0}};
  s.topology.vertices = {{"g0", VertexKind::kDevice}, {"g1", VertexKind::kDevice}, {"g0", VertexKind::kSwitch}};
  s.topology.graph_links = {{"g0", "sw", 1e9, 0}, {"g1", "g1", 1e9, 0}};
  problems = Validate(s);
  ASSERT_EQ(Keys(problems),
            (std::vector<std::string>{"topology.vertices.2.name", "topology.links.0.b", "topology.links.1.b"}));
  EXPECT_EQ(problems[0].message, "vertex 'g0' is listed twice");
  EXPECT_EQ(problems[1].message, "unknown vertex 'sw' (vertices: g0, g1)");
  EXPECT_EQ(problems[2].message, "a link from 'g1' to itself");
  // Sound links that leave a device alone: the machine cannot be built.
  s.topology.vertices[2].name = "sw";
  s.topology.graph_links.pop_back();
  problems = Validate(s);
  ASSERT_EQ(Keys(problems), std::vector<std::string>{"topology"});
  EXPECT_EQ(problems[0].message, "device 1 (g1) cannot reach device 0 (g0)");
}

// zb-v and dualpipe-v run 2 chunks when pipeline.chunks is not stated; a chunks they cannot run
// is one problem at pipeline.chunks naming the schedule, and so is a stated 1.
TEST(Validate, VSchedulesTakeTwoChunks) {
  Scenario s = Sound();
  s.pipeline.microbatches = 8;
  s.pipeline.schedules = {"zb-v", "dualpipe-v"};
  EXPECT_TRUE(Validate(s).empty());
  const schedules::GeneratorInfo& zbv = *schedules::FindGenerator("zb-v");
  EXPECT_EQ(GeneratorParamsFor(s.pipeline, zbv).chunks, 2);
  s.pipeline.chunks = 3;
  const std::vector<ScenarioProblem> problems = Validate(s);
  ASSERT_EQ(Keys(problems), (std::vector<std::string>{"pipeline.chunks", "pipeline.chunks"}));
  EXPECT_EQ(problems[0].message,
            "zb-v runs two stages per rank in a V; chunks must be 2 (got 3); without pipeline.chunks, zb-v takes 2");
  s.pipeline.chunks = 1;
  ASSERT_EQ(Keys(Validate(s)), (std::vector<std::string>{"pipeline.chunks", "pipeline.chunks"}));
  // A model needs a layer for each of the V's stages.
  s.pipeline.chunks = 0;
  s.pipeline.schedules = {"1f1b", "zb-v"};
  s.model.costs.reset();
  s.model.mlp = MlpSpec{6, 16};
  const std::vector<ScenarioProblem> layers = Validate(s);
  ASSERT_EQ(Keys(layers), std::vector<std::string>{"model.mlp.layers"});
  EXPECT_EQ(layers[0].message, "expected at least 8 layers, one per stage (zb-v runs 2 stages per rank), got 6");
}

TEST(Validate, UnknownScheduleBuiltInCode) {
  Scenario s = Sound();
  s.pipeline.schedules = {"1f1c"};
  const std::vector<ScenarioProblem> problems = Validate(s);
  ASSERT_EQ(Keys(problems), std::vector<std::string>{"pipeline.schedule"});
  EXPECT_TRUE(testing::StartsWith(problems[0].message, "unknown schedule '1f1c' (known: gpipe, "));
}

TEST(Validate, AProfileMustFitThePipelineAndTheModel) {
  ScratchDir dir;
  Scenario s = Sound();
  s.model.costs.reset();
  s.model.mlp = MlpSpec{4, 16};
  s.pipeline.microbatch_size = 4;
  const std::string layer = "{forward: 1ms, backward_input: 1ms, backward_weight: 1ms, activation_bytes: 0, "
                            "weight_bytes: 0}";
  testing::ReadProfileInto(&s, dir.Write("p.yaml", "microbatch_size: 8\nlayers: [" + layer + ", " + layer + ", " +
                                                       layer + ", " + layer + ", " + layer + "]\n"));
  const std::vector<ScenarioProblem> problems = Validate(s);
  ASSERT_EQ(Keys(problems), (std::vector<std::string>{"model.profile", "model.profile"}));
  EXPECT_EQ(problems[0].message, "profile was measured at microbatch_size 8 but pipeline.microbatch_size is 4");
  EXPECT_EQ(problems[1].message, "profile has 5 layers but the scenario's model has 4");
  // A path alone is not a profile: LoadScenario reads it, code reads it with LoadProfile.
  s.model.profile.reset();
  EXPECT_EQ(Validate(s).at(0).message, s.model.profile_path +
                                           " is named but not read (set model.profile to LoadProfile of it)");
}

// What the cost models derive is checked once the parts fit, as the scenario's own error.
TEST(Validate, DerivedLimitsOnceThePartsFit) {
  Scenario s = Sound();
  s.model.costs.reset();
  s.model.mlp = MlpSpec{4, 1 << 20};
  s.topology.device.peak_flops = 1e6;
  std::vector<ScenarioProblem> problems = Validate(s);
  ASSERT_EQ(Keys(problems), std::vector<std::string>{""});
  EXPECT_TRUE(testing::StartsWith(problems[0].message, "test.yaml: a forward of stage 0 would take 4.4e+06 s"))
      << problems[0].message;
  EXPECT_EQ(DescribeProblems(s, problems), problems[0].message);
  // A problem of the parts comes alone: no costs are built from parts that do not fit.
  s.topology.devices_per_node = 3;
  EXPECT_EQ(Keys(Validate(s)), std::vector<std::string>{"pipeline.ranks"});
}

// ---- the same problems in a file: LoadScenario locates each at its key ------------------

// Line numbers matter: tests find positions with PosOf, never by counting here.
const std::string kFile = R"(name: tiny
topology: {device: {name: gpu, peak: 100TFLOPS, memory: 16GiB}, devices_per_node: 4,
           links: [{scope: node, bandwidth: 100GB/s, latency: 2us}]}
model:
  mlp: {layers: 8, hidden: 16}
pipeline: {schedule: 1f1b, ranks: 4, microbatches: 8}
)";

using testing::LoadError;

TEST(ValidateInAFile, ProblemsJoinedEachAtItsKey) {
  ScratchDir dir;
  const std::string text = testing::Replace(
      testing::Replace(kFile, "ranks: 4", "ranks: 16"), "mlp: {layers: 8, hidden: 16}",
      "mlp: {layers: 8, hidden: 16}\n  transformer: {layers: 8, hidden: 16, heads: 3, seq: 4, vocab: 10}");
  const std::string at = dir.Path("scenario.yaml") + ":";
  EXPECT_EQ(LoadError(dir, text),
            at + testing::PosOf(text, "16, microbatches") +
                ": pipeline.ranks: topology has 4 devices but pipeline.ranks is 16; " + at +
                testing::PosOf(text, "{layers: 8, hidden: 16}") + ": model.mlp: expected either transformer or mlp, "
                "not both; " + at + testing::PosOf(text, "3, seq") +
                ": model.transformer.heads: expected heads to divide hidden (16), got 3; " + at +
                testing::PosOf(text, "8, hidden: 16, heads") +
                ": model.transformer.layers: expected at least 16 layers, one per stage (pipeline.ranks x "
                "pipeline.chunks), got 8");
  // A key the file does not state is placed at its block, under its own name.
  const std::string no_links =
      testing::Replace(kFile, ",\n           links: [{scope: node, bandwidth: 100GB/s, latency: 2us}]", "");
  EXPECT_EQ(LoadError(dir, no_links), at + testing::PosOf(no_links, "{device: {") +
                                          ": topology.links: expected a link with scope: node (the node has 4 "
                                          "devices)");
}

// zb-v and dualpipe-v named without chunks run 2 chunks, as under `schedule: all`; a chunks
// that contradicts one is one line at pipeline.chunks naming both.
TEST(ValidateInAFile, VSchedulesWithoutChunks) {
  ScratchDir dir;
  const std::string text = testing::Replace(kFile, "schedule: 1f1b", "schedule: [zb-v, dualpipe-v]");
  const Scenario s = LoadScenario(dir.Write("v.yaml", text), {});
  for (const char* name : {"zb-v", "dualpipe-v"}) {
    EXPECT_EQ(GeneratorParamsFor(s.pipeline, *schedules::FindGenerator(name)).chunks, 2) << name;
  }
  const std::string three = testing::Replace(text, "microbatches: 8}", "microbatches: 8, chunks: 3}");
  EXPECT_EQ(LoadError(dir, three),
            dir.Path("scenario.yaml") + ":" + testing::PosOf(three, "3}") +
                ": pipeline.chunks: zb-v runs two stages per rank in a V; chunks must be 2 (got 3); without "
                "pipeline.chunks, zb-v takes 2; " + dir.Path("scenario.yaml") + ":" + testing::PosOf(three, "3}") +
                ": pipeline.chunks: dualpipe-v runs two stages per rank in a V; chunks must be 2 (got 3); without "
                "pipeline.chunks, dualpipe-v takes 2");
  EXPECT_EQ(LoadError(dir, text, {"pipeline.chunks=3", "pipeline.schedule=zb-v"}),
            "--set pipeline.chunks: zb-v runs two stages per rank in a V; chunks must be 2 (got 3); without "
            "pipeline.chunks, zb-v takes 2");
}

TEST(ValidateInAFile, AProfileThatDoesNotFit) {
  ScratchDir dir;
  const std::string layer = "{forward: 1ms, backward_input: 1ms, backward_weight: 1ms, activation_bytes: 0, "
                            "weight_bytes: 0}";
  dir.Write("p.yaml", "microbatch_size: 2\nlayers: [" + layer + ", " + layer + ", " + layer + ", " + layer + "]\n");
  const std::string text = testing::Replace(kFile, "mlp: {layers: 8, hidden: 16}",
                                            "mlp: {layers: 8, hidden: 16}\n  profile: p.yaml");
  const std::string at = dir.Path("scenario.yaml") + ":" + testing::PosOf(text, "p.yaml") + ": model.profile: ";
  EXPECT_EQ(LoadError(dir, text), at + "profile was measured at microbatch_size 2 but pipeline.microbatch_size is 1; " +
                                      at + "profile has 4 layers but the scenario's model has 8");
}

// Precision is stated once (scenario.h): training.dtype, else model.transformer.dtype, else
// fp32 with a training block and bf16 without; both stated, they name the same stored type.
TEST(ValidateInAFile, PrecisionIsStatedOnce) {
  ScratchDir dir;
  const std::string gpt = testing::Replace(kFile, "mlp: {layers: 8, hidden: 16}",
                                           "transformer: {layers: 8, hidden: 16, heads: 4, seq: 4, vocab: 10}");
  const std::string path = dir.Write("gpt.yaml", gpt);
  const auto dtype = [&](const std::vector<std::string>& sets) { return LoadScenario(path, sets).training.dtype; };
  const std::string training = "training={optimizer: adam, lr: 0.1}";
  EXPECT_EQ(dtype({}), Dtype::kBf16);
  EXPECT_EQ(dtype({training}), Dtype::kFp32);
  EXPECT_EQ(dtype({"model.transformer.dtype=fp16"}), Dtype::kFp16);
  EXPECT_EQ(dtype({training, "model.transformer.dtype=fp16"}), Dtype::kFp16);
  EXPECT_EQ(dtype({training, "training.dtype=bf16"}), Dtype::kBf16);
  EXPECT_EQ(dtype({training, "training.dtype=bf16", "model.transformer.dtype=bf16"}), Dtype::kBf16);
  EXPECT_EQ(dtype({training, "training.dtype=tf32", "model.transformer.dtype=fp32"}), Dtype::kTf32);
  EXPECT_EQ(ErrorOf([&] { dtype({training, "training.dtype=fp32", "model.transformer.dtype=bf16"}); }),
            "--set model.transformer.dtype: bf16 disagrees with training.dtype fp32; the precision is stated once, "
            "in training.dtype");
  EXPECT_EQ(ErrorOf([&] { dtype({training, "training.dtype=fp16", "model.transformer.dtype=bf16"}); }),
            "--set model.transformer.dtype: bf16 disagrees with training.dtype fp16; the precision is stated once, "
            "in training.dtype");
  EXPECT_EQ(ErrorOf([&] { dtype({"model.transformer.dtype=fp8"}); }),
            "--set model.transformer.dtype: fp8 stores no tensors: state the 16-bit precision (bf16) here and "
            "training.fp8: true to run the linear layers' GEMMs in FP8");
  EXPECT_EQ(ErrorOf([&] { dtype({"model.transformer.dtype=fp4"}); }),
            "--set model.transformer.dtype: expected one of fp32, tf32, bf16, fp16, fp8, got 'fp4'");
}

}  // namespace
}  // namespace stagecraft::sim
