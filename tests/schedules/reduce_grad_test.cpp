// REDUCE_GRAD in the IR (lower.h, validate.h): with replicas, every STEP reads a REDUCE_GRAD of
// its stage and version, placed on its rank after the last backward of the update it applies
// and before the STEP; the STEP waits as late as its stage allows. Checked on every generator
// against facts read off the op lists here (not lower.cpp's rule), plus hand-worked 1F1B and
// interleaved ranks and each way validation must refuse a misplaced or missing REDUCE_GRAD.
#include <gtest/gtest.h>

#include "stagecraft/schedules/weight_policy.h"

#include <algorithm>
#include <string>
#include <vector>

#include "generator_cases.h"
#include "stagecraft/schedules/csv_io.h"
#include "stagecraft/schedules/json_io.h"
#include "stagecraft/schedules/lower.h"
#include "stagecraft/schedules/validate.h"

namespace stagecraft::schedules {
namespace {

using test_cases::GeneratorCase;

Schedule Replicated(const GeneratorCase& c, int replicas, P2p p2p = P2p::kAhead) {
  GeneratorParams p = c.params;
  p.data_parallel = replicas;
  return Lower(Generate(c.info->name, p), p2p);
}

int Count(const Schedule& s, OpKind kind) {
  int n = 0;
  for (const auto& ops : s.ops) {
    for (const Op& op : ops) n += op.kind == kind;
  }
  return n;
}

// Whether `op` (a backward) contributes to the update of `step_op` (a STEP): the same stage,
// and the same microbatch under a policy that updates per microbatch, the same step otherwise.
bool FeedsUpdate(const Schedule& s, const Op& op, const Op& step_op) {
  if (!IsBackward(op.kind) || op.stage != step_op.stage || op.step != step_op.step) return false;
  return !PolicyInfo(s.weights).update_per_microbatch || op.microbatch == step_op.microbatch;
}

TEST(ReduceGradTest, EveryStepReadsOneReduceAfterItsGradients) {
  for (const auto& c : test_cases::SmallGeneratorCases()) {
    SCOPED_TRACE(std::string(c.info->name) + " ranks " + std::to_string(c.params.ranks) + " m " +
                 std::to_string(c.params.microbatches) + " steps " + std::to_string(c.params.steps));
    const Schedule s = Replicated(c, 4);
    EXPECT_EQ(s.data_parallel, 4);
    EXPECT_TRUE(Validate(s).empty()) << SummarizeDiagnostics(Validate(s));
    EXPECT_EQ(Count(s, OpKind::kReduceGrad), Count(s, OpKind::kStep));
    for (const auto& ops : s.ops) {
      for (size_t i = 0; i < ops.size(); ++i) {
        if (ops[i].kind != OpKind::kStep) continue;
        // Its REDUCE_GRAD: before it on the rank, of its stage and version, after every
        // backward of its update, and no backward of the update after the REDUCE_GRAD.
        size_t reduce = ops.size();
        for (size_t k = 0; k < i; ++k) {
          if (ops[k].kind == OpKind::kReduceGrad && ops[k].stage == ops[i].stage && ops[k].version == ops[i].version) {
            reduce = k;
          }
        }
        ASSERT_LT(reduce, i) << "no REDUCE_GRAD before " << ActionString(ops[i], s.microbatches);
        int gradients = 0;
        for (size_t k = 0; k < ops.size(); ++k) {
          if (!FeedsUpdate(s, ops[k], ops[i])) continue;
          ++gradients;
          EXPECT_LT(k, reduce) << ActionString(ops[k], s.microbatches) << " after its REDUCE_GRAD";
        }
        EXPECT_GT(gradients, 0);
        // Nothing of the stage runs between the REDUCE_GRAD and the STEP except comms: the
        // STEP is as late as the stage allows, but before the stage's next compute op.
        for (size_t k = reduce + 1; k < i; ++k) {
          EXPECT_FALSE(IsCompute(ops[k].kind) && ops[k].stage == ops[i].stage)
              << ActionString(ops[k], s.microbatches) << " of the stage runs before its STEP";
        }
      }
    }
  }
}

TEST(ReduceGradTest, OneReplicaHasNoneAndLoweringIsStable) {
  for (const auto& c : test_cases::SmallGeneratorCases()) {
    EXPECT_EQ(Count(Replicated(c, 1), OpKind::kReduceGrad), 0) << c.info->name;
    const Schedule once = Replicated(c, 2, P2p::kLockstep);
    EXPECT_EQ(Lower(once, P2p::kLockstep), once) << c.info->name;  // lowering the lowered changes nothing
    Schedule back = once;
    back.data_parallel = 1;
    EXPECT_EQ(Count(Lower(back), OpKind::kReduceGrad), 0) << c.info->name;
  }
}

// A schedule that carries its own transfers (a lowered file) gets its REDUCE_GRADs without
// being lowered again: every other op keeps its place.
TEST(ReduceGradTest, PlacedInALoweredScheduleKeepsItsTransfers) {
  for (const auto& c : test_cases::SmallGeneratorCases()) {
    Schedule s = Replicated(c, 1, P2p::kLockstep);
    s.data_parallel = 2;
    const Schedule placed = PlaceReduceGrads(s);
    EXPECT_TRUE(Validate(placed).empty()) << c.info->name << ": " << SummarizeDiagnostics(Validate(placed));
    for (int r = 0; r < s.ranks(); ++r) {
      auto others = [](const std::vector<Op>& ops) {
        std::vector<Op> out;
        for (const Op& op : ops) {
          if (op.kind != OpKind::kStep && op.kind != OpKind::kReduceGrad) out.push_back(op);
        }
        return out;
      };
      EXPECT_EQ(others(placed.ops[r]), others(s.ops[r])) << c.info->name;
    }
  }
}

std::string ComputeOrder(const std::vector<Op>& ops, int microbatches) {
  std::string out;
  for (const Op& op : ops) {
    if (IsComm(op.kind)) continue;
    out += (out.empty() ? "" : " ") + ActionString(op, microbatches);
  }
  return out;
}

// Hand-worked: 1F1B on 2 ranks, 3 microbatches. Rank 0's last backward is 0B2: the
// all-reduce is posted there and its STEP follows directly (nothing else is left).
// Interleaved on 2 ranks with 2 chunks, 2 microbatches: rank 0 holds stages 0 and 2; stage 2's
// backwards end first, so its REDUCE_GRAD overlaps stage 0's backwards and its STEP waits for
// the end of the rank's list.
TEST(ReduceGradTest, HandWorkedPlacement) {
  GeneratorParams p = test_cases::Params(2, 3);
  p.data_parallel = 2;
  const Schedule flush = Lower(Generate("1f1b", p));
  EXPECT_EQ(ComputeOrder(flush.ops[0], 3), "0F0 0F1 0B0 0F2 0B1 0B2 0REDUCE_GRAD1 0STEP1");
  EXPECT_EQ(ComputeOrder(flush.ops[1], 3), "1F0 1B0 1F1 1B1 1F2 1B2 1REDUCE_GRAD1 1STEP1");
  GeneratorParams q = test_cases::Params(2, 2, 1, 2);
  q.data_parallel = 2;
  const Schedule inter = Lower(Generate("interleaved", q));
  const std::string order = ComputeOrder(inter.ops[0], 2);
  EXPECT_NE(order.find("2B1 2REDUCE_GRAD1 0B0"), std::string::npos) << order;
  EXPECT_NE(order.find("0B1 0REDUCE_GRAD1 2STEP1 0STEP1"), std::string::npos) << order;
}

// Each misplacement is one diagnostic naming the op.
TEST(ReduceGradTest, ValidationRefusesMisplacedReduces) {
  GeneratorParams p = test_cases::Params(2, 3);
  p.data_parallel = 2;
  const Schedule good = Lower(Generate("1f1b", p));
  ASSERT_TRUE(Validate(good).empty());
  auto find = [](const std::vector<Op>& ops, OpKind kind) {
    return static_cast<size_t>(std::find_if(ops.begin(), ops.end(), [&](const Op& o) { return o.kind == kind; }) -
                               ops.begin());
  };
  auto expect = [](const Schedule& s, DiagCode code, const std::string& text) {
    const auto diags = Validate(s);
    ASSERT_FALSE(diags.empty()) << text;
    bool found = false;
    for (const auto& d : diags) found |= d.code == code && d.message.find(text) != std::string::npos;
    EXPECT_TRUE(found) << SummarizeDiagnostics(diags);
  };
  {  // missing
    Schedule s = good;
    s.ops[1].erase(s.ops[1].begin() + static_cast<long>(find(s.ops[1], OpKind::kReduceGrad)));
    expect(s, DiagCode::kMissing, "no REDUCE_GRAD");
  }
  {  // after its STEP
    Schedule s = good;
    const size_t r = find(s.ops[1], OpKind::kReduceGrad), t = find(s.ops[1], OpKind::kStep);
    std::swap(s.ops[1][r], s.ops[1][t]);
    expect(s, DiagCode::kOrder, "does not come before");
  }
  {  // before the last backward
    Schedule s = good;
    const size_t r = find(s.ops[1], OpKind::kReduceGrad);
    const Op reduce = s.ops[1][r];
    s.ops[1].erase(s.ops[1].begin() + static_cast<long>(r));
    s.ops[1].insert(s.ops[1].begin() + 1, reduce);
    expect(s, DiagCode::kOrder, "REDUCE_GRAD1) applies gradients before");
  }
  {  // one replica
    Schedule s = good;
    s.data_parallel = 1;
    expect(s, DiagCode::kBadShape, "one replica");
  }
  {  // a version no STEP produces
    Schedule s = good;
    s.ops[1][find(s.ops[1], OpKind::kReduceGrad)].version = 7;
    expect(s, DiagCode::kVersion, "version 7");
  }
}

TEST(ReduceGradTest, FilesCarryIt) {
  GeneratorParams p = test_cases::Params(2, 2);
  p.data_parallel = 3;
  const Schedule s = Lower(Generate("1f1b", p));
  EXPECT_EQ(FromJson(ToJson(s), "t.json"), s);
  // One replica's files do not name it (they read as before).
  EXPECT_EQ(ToJson(Lower(Generate("1f1b", test_cases::Params(2, 2)))).find("data_parallel"), std::string::npos);
  // PyTorch's CSV action carries no microbatch; an import skips it.
  const std::string csv = ExportCsv(s, CsvForm::kComputeComms);
  EXPECT_NE(csv.find("0B1,0REDUCE_GRAD"), std::string::npos) << csv;
  EXPECT_EQ(ExportCsv(s, CsvForm::kComputeOnly).find("REDUCE_GRAD"), std::string::npos);
  CsvImportOptions options;
  options.microbatches = 2;
  const Schedule back = ImportCsv(csv, "t.csv", options);
  EXPECT_EQ(Count(back, OpKind::kReduceGrad), 0);
}

}  // namespace
}  // namespace stagecraft::schedules
