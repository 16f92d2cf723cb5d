// Hand-broken schedules must produce exactly the diagnostics that describe what was broken.
#include "stagecraft/schedules/validate.h"

#include <string>

#include <gtest/gtest.h>

#include "generator_cases.h"
#include "stagecraft/base/error.h"
#include "stagecraft/schedules/generators.h"
#include "stagecraft/schedules/lower.h"
#include "stagecraft/schedules/weights.h"

namespace stagecraft::schedules {
namespace {

Op MakeOp(OpKind kind, int stage, int mb) {
  Op op;
  op.kind = kind;
  op.stage = stage;
  op.microbatch = mb;
  return op;
}

// A flush schedule of one step from hand-written per-rank compute lists.
Schedule Hand(int ranks, int m, std::vector<std::vector<Op>> ops) {
  Schedule s;
  s.name = "hand";
  s.shape = Shape{ranks, 1, Placement::kLoop};
  s.microbatches = m;
  s.ops = std::move(ops);
  AssignWeights(&s);
  return s;
}

using test_cases::Params;

int Count(const std::vector<Diagnostic>& diags, DiagCode code) {
  int n = 0;
  for (const auto& d : diags) n += d.code == code;
  return n;
}

std::string All(const std::vector<Diagnostic>& diags) {
  std::string out;
  for (const auto& d : diags) out += std::string(DiagCodeName(d.code)) + ": " + d.message + "\n";
  return out;
}

size_t Find(const std::vector<Op>& ops, OpKind kind, int stage, int mb) {
  for (size_t i = 0; i < ops.size(); ++i) {
    if (ops[i].kind == kind && ops[i].stage == stage && ops[i].microbatch == mb) return i;
  }
  ADD_FAILURE() << "op not found";
  return 0;
}

TEST(Validate, MissingForward) {
  Schedule s = Generate("1f1b", Params(2, 3));
  s.ops[1].erase(s.ops[1].begin() + Find(s.ops[1], OpKind::kF, 1, 2));
  const auto diags = Validate(s);
  ASSERT_EQ(diags.size(), 1u) << All(diags);
  EXPECT_EQ(diags[0].code, DiagCode::kMissing);
  EXPECT_EQ(diags[0].message, "stage 1 step 0 microbatch 2: no F");
}

TEST(Validate, MissingBackwardAndDuplicateReportedTogether) {
  Schedule s = Generate("gpipe", Params(2, 2));
  s.ops[0].erase(s.ops[0].begin() + Find(s.ops[0], OpKind::kB, 0, 1));
  s.ops[1].insert(s.ops[1].begin() + 1, s.ops[1][0]);  // 1F0 twice
  const auto diags = Validate(s);
  EXPECT_EQ(Count(diags, DiagCode::kMissing), 1) << All(diags);
  EXPECT_EQ(Count(diags, DiagCode::kDuplicate), 1) << All(diags);
  EXPECT_NE(All(diags).find("stage 0 step 0 microbatch 1: no backward (B, or I and W)"), std::string::npos) << All(diags);
  EXPECT_NE(All(diags).find("rank 1 #1 (1F0) duplicates rank 1 #0 (1F0)"), std::string::npos) << All(diags);
}

TEST(Validate, BackwardBeforeForward) {
  // Rank 1 (last stage) runs B0 before F0.
  const Schedule s = Hand(2, 1, {{MakeOp(OpKind::kF, 0, 0), MakeOp(OpKind::kB, 0, 0)},
                                 {MakeOp(OpKind::kB, 1, 0), MakeOp(OpKind::kF, 1, 0)}});
  const auto diags = Validate(s);
  ASSERT_EQ(Count(diags, DiagCode::kOrder), 1) << All(diags);
  EXPECT_NE(All(diags).find("rank 1 #0 (1B0) runs before its F rank 1 #2 (1F0)"), std::string::npos) << All(diags);
}

TEST(Validate, WeightGradBeforeInputGrad) {
  Schedule s = Generate("zb-h1", Params(2, 2));
  auto& r1 = s.ops[1];
  std::swap(r1[Find(r1, OpKind::kI, 1, 0)], r1[Find(r1, OpKind::kW, 1, 0)]);
  const auto diags = Validate(s);
  ASSERT_EQ(diags.size(), 1u) << All(diags);
  EXPECT_EQ(diags[0].code, DiagCode::kOrder);
  EXPECT_NE(diags[0].message.find("(1W0) runs before its I"), std::string::npos) << diags[0].message;
}

TEST(Validate, ReadOfAVersionNoStepProduces) {
  Schedule s = Generate("1f1b", Params(2, 2));
  s.ops[0][Find(s.ops[0], OpKind::kF, 0, 1)].version = 7;
  const auto diags = Validate(s);
  EXPECT_EQ(Count(diags, DiagCode::kVersion), 2) << All(diags);  // the read, and B0 != F's version
  EXPECT_NE(All(diags).find("rank 0 #1 (0F1) reads version 7 of stage 0, which no STEP produces"), std::string::npos)
      << All(diags);
}

// A STEP's version sized a table (and version + 1 overflowed at INT32_MAX): a schedule read
// from JSON could ask for gigabytes. Beyond the policy's STEP count it is one diagnostic.
TEST(Validate, StepVersionBeyondThePolicysSteps) {
  Schedule s = Generate("1f1b", Params(2, 2));
  const size_t step = Find(s.ops[1], OpKind::kStep, 1, 0);
  for (const int version : {2, 1'000'000'000, 2147483647}) {
    s.ops[1][step].version = version;
    const auto diags = Validate(s);
    EXPECT_EQ(Count(diags, DiagCode::kVersion), 1) << All(diags);
    EXPECT_NE(All(diags).find("(1STEP" + std::to_string(version) + "): version " + std::to_string(version) +
                              " is beyond the 1 STEPs per stage of the flush policy"),
              std::string::npos)
        << All(diags);
  }
}

TEST(Validate, ReadBeforeTheStepThatProducesIt) {
  Schedule s = Generate("gpipe", Params(1, 1));
  s.steps = 2;
  s = Generate("gpipe", [] { auto p = Params(1, 1); p.steps = 2; return p; }());
  // ops: F0(v0) B0(v0) STEP(v1) F0'(v1) B0'(v1) STEP(v2); move the step-1 forward first.
  auto& ops = s.ops[0];
  ASSERT_EQ(ops.size(), 6u);
  std::rotate(ops.begin(), ops.begin() + 3, ops.begin() + 4);
  const auto diags = Validate(s);
  EXPECT_GE(Count(diags, DiagCode::kOrder), 1) << All(diags);
  EXPECT_NE(All(diags).find("reads version 1 before rank 0 #3 (0STEP1) produces it"), std::string::npos) << All(diags);
}

// Rank 0 runs 1F1B without warm-up and rank 1 runs GPipe: rank 1's F1 waits for rank 0's
// F1, which waits behind rank 0's B0, which waits for rank 1's B0, which is behind F1.
Schedule Deadlocked() {
  return Hand(2, 2,
              {{MakeOp(OpKind::kF, 0, 0), MakeOp(OpKind::kB, 0, 0), MakeOp(OpKind::kF, 0, 1),
                MakeOp(OpKind::kB, 0, 1)},
               {MakeOp(OpKind::kF, 1, 0), MakeOp(OpKind::kF, 1, 1), MakeOp(OpKind::kB, 1, 0),
                MakeOp(OpKind::kB, 1, 1)}});
}

TEST(Validate, DeadlockNamesTheOpsOnTheCycle) {
  const Schedule s = Deadlocked();
  const auto diags = Validate(s);
  ASSERT_EQ(diags.size(), 1u) << All(diags);
  EXPECT_EQ(diags[0].code, DiagCode::kDeadlock);
  for (const char* op : {"rank 0 #1 (0B0)", "rank 0 #2 (0F1)", "rank 1 #1 (1F1)", "rank 1 #2 (1B0)"}) {
    EXPECT_NE(diags[0].message.find(op), std::string::npos) << op << " not in " << diags[0].message;
  }
  EXPECT_NE(diags[0].message.find("cycle of 4 ops"), std::string::npos) << diags[0].message;
  EXPECT_THROW(Lower(s), InputError);  // lowering refuses what cannot run
}

TEST(Validate, LoweredCommProblems) {
  const Schedule good = Lower(Generate("1f1b", Params(2, 2)));
  ASSERT_TRUE(Validate(good).empty()) << All(Validate(good));

  Schedule wrong_peer = good;
  for (Op& op : wrong_peer.ops[0]) {
    if (op.kind == OpKind::kSendF) { op.peer = 0; break; }
  }
  EXPECT_EQ(Count(Validate(wrong_peer), DiagCode::kCommMismatch), 2) << All(Validate(wrong_peer));

  Schedule missing = good;
  std::erase_if(missing.ops[1], [](const Op& op) { return op.kind == OpKind::kRecvF && op.microbatch == 1; });
  const auto missing_diags = Validate(missing);
  EXPECT_NE(All(missing_diags).find("step 0 microbatch 1: no RECV of activations at stage 1 from stage 0"),
            std::string::npos) << All(missing_diags);

  // Swap the two RECV_F on rank 1: FIFO order of channel 0 -> 1 breaks.
  Schedule swapped = good;
  auto& r1 = swapped.ops[1];
  std::swap(r1[Find(r1, OpKind::kRecvF, 1, 0)], r1[Find(r1, OpKind::kRecvF, 1, 1)]);
  const auto swapped_diags = Validate(swapped);
  EXPECT_GE(Count(swapped_diags, DiagCode::kCommMismatch), 1) << All(swapped_diags);
  EXPECT_NE(All(swapped_diags).find("channel rank 0 -> rank 1: transfer #0"), std::string::npos) << All(swapped_diags);
  EXPECT_GE(Count(swapped_diags, DiagCode::kOrder), 1) << All(swapped_diags);  // RECV 1 now after its F
}

TEST(Validate, OpOnTheWrongRankAndOutOfRange) {
  Schedule s = Generate("gpipe", Params(2, 1));
  s.ops[0][0].stage = 1;
  Op bad = MakeOp(OpKind::kF, 0, 5);
  s.ops[0].push_back(bad);
  const auto diags = Validate(s);
  EXPECT_EQ(Count(diags, DiagCode::kWrongRank), 1) << All(diags);
  EXPECT_EQ(Count(diags, DiagCode::kBadIndex), 1) << All(diags);
}

// One line for a command's error: the count, each problem once with its code, then the rest counted.
TEST(Validate, SummaryNamesEachCodeOnceAndCountsTheRest) {
  const std::vector<Diagnostic> diags = {{DiagCode::kMissing, "a"}, {DiagCode::kOrder, "b"},
                                         {DiagCode::kDeadlock, "cycle of 2 ops: x -> y -> back to the first"},
                                         {DiagCode::kVersion, "d"}, {DiagCode::kDuplicate, "e"}};
  EXPECT_EQ(SummarizeDiagnostics(diags),
            "5 problem(s): missing: a; order: b; deadlock: cycle of 2 ops: x -> y -> back to the first; and 2 more");
  EXPECT_EQ(SummarizeDiagnostics({diags[0]}), "1 problem(s): missing: a");
  EXPECT_EQ(SummarizeDiagnostics(std::vector<Diagnostic>(diags.begin(), diags.begin() + 3), 3),
            "3 problem(s): missing: a; order: b; deadlock: cycle of 2 ops: x -> y -> back to the first");
}

// A reader sees "CODE: message": no message repeats its code's name in front.
TEST(Validate, NoMessageStartsWithItsCodeName) {
  const Schedule deadlock = Deadlocked();
  Schedule broken = Lower(Generate("1f1b", Params(2, 2)));
  broken.ops[0].push_back(broken.ops[0][0]);                                  // duplicate
  broken.ops[1][0].peer = 1;                                                  // comm-mismatch
  std::erase_if(broken.ops[1], [](const Op& op) { return op.kind == OpKind::kStep; });  // missing
  Schedule bad_shape = Generate("gpipe", Params(2, 1));
  bad_shape.ops.pop_back();
  int seen = 0;
  for (const Schedule* s : std::initializer_list<const Schedule*>{&deadlock, &broken, &bad_shape}) {
    for (const Diagnostic& d : Validate(*s)) {
      ++seen;
      EXPECT_FALSE(d.message.starts_with(DiagCodeName(d.code))) << DiagCodeName(d.code) << ": " << d.message;
    }
  }
  EXPECT_GE(seen, 4);
}

TEST(Validate, MissingStep) {
  Schedule s = Generate("1f1b", Params(2, 2));
  std::erase_if(s.ops[1], [](const Op& op) { return op.kind == OpKind::kStep; });
  const auto diags = Validate(s);
  ASSERT_EQ(diags.size(), 1u) << All(diags);
  EXPECT_EQ(diags[0].message, "stage 1: 0 STEPs, the flush policy needs 1");
}

}  // namespace
}  // namespace stagecraft::schedules
