// Copies between device and host memory as IR ops (OFFLOAD / RELOAD, DESIGN.md §10): their action
// strings, the residency rule Validate holds them to (worked by hand on GPipe's lists), and their
// forms in JSON, CSV and traces.
#include <algorithm>
#include <functional>
#include <string>

#include <gtest/gtest.h>

#include "generator_cases.h"
#include "stagecraft/base/error.h"
#include "stagecraft/schedules/csv_io.h"
#include "stagecraft/schedules/generators.h"
#include "stagecraft/schedules/json_io.h"
#include "stagecraft/schedules/lower.h"
#include "stagecraft/schedules/trace.h"
#include "stagecraft/schedules/validate.h"

namespace stagecraft::schedules {
namespace {

Op Copy(OpKind kind, Tensor tensor, int stage, int mb, int version = 0) {
  return Op{.kind = kind, .stage = stage, .microbatch = mb, .version = version, .tensor = tensor};
}

// Where the op of `kind` for `mb` of stage 0 sits on rank 0 (step 0).
int IndexOf(const Schedule& s, OpKind kind, int mb) {
  const auto& ops = s.ops[0];
  const auto it = std::find_if(ops.begin(), ops.end(), [&](const Op& op) {
    return op.kind == kind && op.stage == 0 && op.microbatch == mb && op.step == 0;
  });
  EXPECT_NE(it, ops.end());
  return static_cast<int>(it - ops.begin());
}

void Insert(Schedule* s, int index, const Op& op) { s->ops[0].insert(s->ops[0].begin() + index, op); }

// GPipe over 2 ranks, 2 microbatches, one step, lowered; rank 0 holds stage 0.
Schedule Gpipe() { return Lower(Generate("gpipe", test_cases::Params(2, 2))); }

// GPipe with microbatch 0's activations on stage 0 offloaded right after its F and reloaded just
// before its B: what PipeOffload does to the longest-lived stash.
Schedule Offloaded() {
  Schedule s = Gpipe();
  Insert(&s, IndexOf(s, OpKind::kF, 0) + 1, Copy(OpKind::kOffload, Tensor::kActivations, 0, 0));
  Insert(&s, IndexOf(s, OpKind::kB, 0), Copy(OpKind::kReload, Tensor::kActivations, 0, 0));
  return s;
}

std::string Messages(const std::vector<Diagnostic>& diags) {
  std::string out;
  for (const Diagnostic& d : diags) out += std::string(DiagCodeName(d.code)) + ": " + d.message + "\n";
  return out;
}

TEST(CopyOps, ActionStringsNameTheTensor) {
  Op act = Copy(OpKind::kOffload, Tensor::kActivations, 0, 1);
  act.step = 1;
  EXPECT_EQ(ActionString(act, 2), "0OFFLOAD_ACT3");  // global microbatch 1 x 2 + 1
  EXPECT_EQ(ActionString(Copy(OpKind::kReload, Tensor::kWeights, 1, 0, 2), 2), "1RELOAD_WEIGHT2");
  EXPECT_EQ(ActionString(Copy(OpKind::kOffload, Tensor::kOptimizer, 3, 0, 1), 4), "3OFFLOAD_OPT1");
  EXPECT_EQ(FirstCopy(Gpipe()), "");
  const Schedule s = Offloaded();
  EXPECT_EQ(FirstCopy(s), "rank 0 #" + std::to_string(IndexOf(s, OpKind::kF, 0) + 1) + " (0OFFLOAD_ACT0)");
}

TEST(CopyOps, AnOffloadReloadedBeforeItsBackwardValidates) {
  const Schedule s = Offloaded();
  EXPECT_EQ(Messages(Validate(s)), "");
  // Lowering keeps them where they were among the compute ops.
  const Schedule again = Lower(StripComms(s));
  EXPECT_EQ(Messages(Validate(again)), "");
  EXPECT_LT(IndexOf(again, OpKind::kF, 0), IndexOf(again, OpKind::kB, 0));
  int offload = -1, reload = -1;
  for (int i = 0; i < static_cast<int>(again.ops[0].size()); ++i) {
    if (again.ops[0][i].kind == OpKind::kOffload) offload = i;
    if (again.ops[0][i].kind == OpKind::kReload) reload = i;
  }
  EXPECT_GT(offload, IndexOf(again, OpKind::kF, 0));
  EXPECT_GT(reload, offload);
  EXPECT_LT(reload, IndexOf(again, OpKind::kB, 0));
}

// Each case breaks the offloaded GPipe one way; Validate must say exactly that.
struct Broken {
  const char* what;
  std::function<void(Schedule*)> edit;
  DiagCode code;
  const char* says;
};

TEST(CopyOps, EachBrokenResidencyIsNamed) {
  const auto erase_kind = [](Schedule* s, OpKind kind) {
    std::erase_if(s->ops[0], [kind](const Op& op) { return op.kind == kind; });
  };
  const Broken cases[] = {
      {"no reload before the backward", [&](Schedule* s) { erase_kind(s, OpKind::kReload); }, DiagCode::kOrder,
       "reads the activations of stage 0 step 0 microbatch 0 while it is offloaded"},
      {"a reload of what was never offloaded", [&](Schedule* s) { erase_kind(s, OpKind::kOffload); },
       DiagCode::kOrder, "reloads the activations of stage 0 step 0 microbatch 0, which is not offloaded"},
      {"an offload before the forward",
       [](Schedule* s) { Insert(s, 0, Copy(OpKind::kOffload, Tensor::kActivations, 0, 1)); }, DiagCode::kOrder,
       "offloads the activations of stage 0 step 0 microbatch 1 before it exists"},
      {"offloaded twice",
       [](Schedule* s) {
         Insert(s, IndexOf(*s, OpKind::kF, 0) + 1, Copy(OpKind::kOffload, Tensor::kActivations, 0, 0));
       },
       DiagCode::kDuplicate, "offloads the activations of stage 0 step 0 microbatch 0 again"},
      {"a copy of nothing", [](Schedule* s) { Insert(s, 0, Copy(OpKind::kReload, Tensor::kNone, 0, 0)); },
       DiagCode::kBadIndex, "a copy names no tensor"},
      {"an F naming a tensor", [](Schedule* s) { s->ops[0][IndexOf(*s, OpKind::kF, 1)].tensor = Tensor::kWeights; },
       DiagCode::kBadIndex, "only an OFFLOAD or RELOAD names a tensor (weights)"},
      {"the weights offloaded before the forwards read them",
       [](Schedule* s) { Insert(s, 0, Copy(OpKind::kOffload, Tensor::kWeights, 0, 0, 0)); }, DiagCode::kOrder,
       "reads version 0 of stage 0's weights while it is offloaded"},
      {"a weight version no STEP makes",
       [](Schedule* s) { s->ops[0].push_back(Copy(OpKind::kOffload, Tensor::kWeights, 0, 0, 2)); },
       DiagCode::kBadIndex, "no such weights in this schedule"},
      {"the optimizer state away at the STEP",
       [](Schedule* s) { Insert(s, 0, Copy(OpKind::kOffload, Tensor::kOptimizer, 0, 0, 1)); }, DiagCode::kOrder,
       "reads stage 0's optimizer state (the update to version 1) while it is offloaded"},
  };
  for (const Broken& c : cases) {
    SCOPED_TRACE(c.what);
    Schedule s = Offloaded();
    c.edit(&s);
    const std::vector<Diagnostic> diags = Validate(s);
    ASSERT_EQ(diags.size(), 1u) << Messages(diags);
    EXPECT_EQ(diags[0].code, c.code);
    EXPECT_NE(diags[0].message.find(c.says), std::string::npos) << diags[0].message;
  }
}

// Hydra's round trip for a shard's weights and ZeRO-Offload's optimizer state: away between
// their uses, back before the next.
TEST(CopyOps, WeightsAndOptimizerStateAwayBetweenUsesValidate) {
  Schedule s = Offloaded();
  const int last_f = IndexOf(s, OpKind::kF, 1);
  Insert(&s, last_f + 1, Copy(OpKind::kOffload, Tensor::kWeights, 0, 0, 0));
  const int first_b = std::min(IndexOf(s, OpKind::kB, 0), IndexOf(s, OpKind::kB, 1));
  Insert(&s, first_b - 1, Copy(OpKind::kReload, Tensor::kWeights, 0, 0, 0));  // before microbatch 0's reload
  Insert(&s, 0, Copy(OpKind::kOffload, Tensor::kOptimizer, 0, 0, 1));
  const auto step = std::find_if(s.ops[0].begin(), s.ops[0].end(), [](const Op& op) { return op.kind == OpKind::kStep; });
  ASSERT_NE(step, s.ops[0].end());
  s.ops[0].insert(step, Copy(OpKind::kReload, Tensor::kOptimizer, 0, 0, 1));
  s.ops[0].push_back(Copy(OpKind::kOffload, Tensor::kWeights, 0, 0, 1));  // the new version, after its STEP
  EXPECT_EQ(Messages(Validate(s)), "");
}

TEST(CopyOps, JsonCarriesTheTensorAndRefusesAnUnknownOne) {
  const Schedule s = Offloaded();
  const std::string json = ToJson(s);
  EXPECT_NE(json.find("\"tensor\":\"activations\""), std::string::npos);
  EXPECT_EQ(ToJson(Gpipe()).find("tensor"), std::string::npos);  // written for copies only
  EXPECT_EQ(FromJson(json, "c.json"), s);
  std::string bad = json;
  bad.replace(bad.find("\"activations\""), 13, "\"moments\"");
  try {
    FromJson(bad, "c.json");
    ADD_FAILURE() << "an unknown tensor was read";
  } catch (const InputError& e) {
    const int at = IndexOf(s, OpKind::kF, 0) + 1;
    EXPECT_EQ(std::string(e.what()), "c.json: ops[0][" + std::to_string(at) +
                                         "].tensor: unknown tensor 'moments' (expected activations, weights, "
                                         "optimizer or gradients)");
  }
}

TEST(CopyOps, PyTorchsCsvHasNoFormForThem) {
  try {
    ExportCsv(Offloaded(), CsvForm::kComputeComms);
    ADD_FAILURE() << "a copy was written as CSV";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("rank 0 has 0OFFLOAD_ACT0"), std::string::npos) << e.what();
  }
  try {
    ImportCsv("0F0,0OFFLOAD0\n", "c.csv", CsvImportOptions{});
    ADD_FAILURE() << "a copy was read from CSV";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("OFFLOAD is not a CSV action in '0OFFLOAD0'"), std::string::npos) << e.what();
  }
}

TEST(CopyOps, TracesGiveCopiesTheirLanesAndTensor) {
  Trace t;
  t.source = "predicted";
  t.schedule = "gpipe";
  t.microbatches = 2;
  t.ops.push_back({0, Stream::kCompute, Op{OpKind::kF, 0, 0, 0, 0}, 0, 0, 1000});
  t.ops.push_back({0, Stream::kToHost, Copy(OpKind::kOffload, Tensor::kActivations, 0, 0), 1, 1000, 500});
  t.ops.push_back({0, Stream::kToDevice, Copy(OpKind::kReload, Tensor::kActivations, 0, 0), 2, 2000, 500});
  const std::string json = TraceToJson(t);
  EXPECT_NE(json.find("\"tid\":4,\"args\":{\"name\":\"to host\"}"), std::string::npos) << json;
  EXPECT_NE(json.find("\"tid\":5,\"args\":{\"name\":\"to device\"}"), std::string::npos);
  EXPECT_EQ(json.find("collective"), std::string::npos);  // no REDUCE_GRAD, no lane
  EXPECT_NE(json.find("\"name\":\"0OFFLOAD_ACT0\""), std::string::npos);
  const TraceReadResult read = TraceFromJson(json, "t.json");
  EXPECT_EQ(read.skipped, 0);
  ASSERT_EQ(read.trace.ops.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(read.trace.ops[i].op, t.ops[i].op) << i;
    EXPECT_EQ(read.trace.ops[i].stream, t.ops[i].stream) << i;
  }
  Trace plain = t;
  plain.ops.resize(1);
  EXPECT_EQ(TraceToJson(plain).find("to host"), std::string::npos);
  // A copy's event without its tensor is skipped, and said why.
  std::string bare = json;
  bare.erase(bare.find(",\"tensor\":\"activations\""), 23);
  const TraceReadResult skipped = TraceFromJson(bare, "t.json");
  EXPECT_EQ(skipped.skipped, 1);
  EXPECT_NE(skipped.first_skipped.find("\"tensor\" is missing (an OFFLOAD or RELOAD names what it copies"),
            std::string::npos)
      << skipped.first_skipped;
}

}  // namespace
}  // namespace stagecraft::schedules
