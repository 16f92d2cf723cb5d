// The phases a Ctrl-C in the Python module must reach within a second (base/stop.h): generation,
// lowering, validation and the metrics each throw StopRequested on a set flag once the schedule
// is large enough for them to look at it, and an unset flag changes nothing they return.
#include <algorithm>
#include <atomic>

#include <gtest/gtest.h>

#include "generator_cases.h"
#include "stagecraft/base/stop.h"
#include "stagecraft/schedules/generators.h"
#include "stagecraft/schedules/lower.h"
#include "stagecraft/schedules/metrics.h"
#include "stagecraft/schedules/validate.h"

namespace stagecraft::schedules {
namespace {

using test_cases::Params;

// 4 ranks x 4096 microbatches of 1F1B: 32,768 compute ops, ~8 StopCheck periods in each phase.
constexpr int kRanks = 4, kMicrobatches = 4096;

// Every op of rank r after the one before it, 1 ns each: a record ComputeMetrics accepts.
RunRecord BackToBack(const Schedule& s) {
  RunRecord r;
  r.ranks.resize(static_cast<size_t>(s.ranks()));
  for (int rank = 0; rank < s.ranks(); ++rank) {
    for (size_t i = 0; i < s.ops[rank].size(); ++i) {
      r.ranks[rank].ops.push_back({static_cast<int64_t>(i), static_cast<int64_t>(i) + 1});
    }
    r.end_ns = std::max<int64_t>(r.end_ns, static_cast<int64_t>(s.ops[rank].size()));
  }
  FinishRunRecord(s, 0, &r);
  return r;
}

TEST(StopTest, EachPhaseStopsOnASetFlag) {
  const Schedule generated = Generate("1f1b", Params(kRanks, kMicrobatches));
  const Schedule lowered = Lower(generated);
  const RunRecord record = BackToBack(lowered);
  std::atomic<bool> stop{true};
  EXPECT_THROW(Generate("1f1b", Params(kRanks, kMicrobatches), &stop), StopRequested);
  EXPECT_THROW(Lower(generated, P2p::kLockstep, kAheadBuffersPerStage, &stop), StopRequested);
  EXPECT_THROW(Lower(generated, P2p::kAhead, kAheadBuffersPerStage, &stop), StopRequested);
  EXPECT_THROW(Validate(lowered, &stop), StopRequested);
  EXPECT_THROW(ComputeMetrics(lowered, record, 1, &stop), StopRequested);
}

TEST(StopTest, AnUnsetFlagChangesNothing) {
  const Schedule generated = Generate("1f1b", Params(kRanks, kMicrobatches));
  std::atomic<bool> never{false};
  const Schedule lowered = Lower(generated, P2p::kAhead, kAheadBuffersPerStage, &never);
  EXPECT_EQ(Generate("1f1b", Params(kRanks, kMicrobatches), &never).ops, generated.ops);
  EXPECT_EQ(lowered.ops, Lower(generated, P2p::kAhead).ops);
  EXPECT_TRUE(Validate(lowered, &never).empty());
  const RunRecord record = BackToBack(lowered);
  EXPECT_EQ(ComputeMetrics(lowered, record, 1, &never).bubble_fraction, ComputeMetrics(lowered, record, 1).bubble_fraction);
}

// A deadlock in a schedule larger than one StopCheck period is still found and named, with
// the flag given and unset (the acyclic fast path must not hide it).
TEST(StopTest, ADeadlockIsStillFoundBehindTheFastPath) {
  Schedule s = Generate("1f1b", Params(2, kMicrobatches));
  // Rank 0's first B moved to the front: it waits for rank 1's B of microbatch 0, which waits
  // for rank 0's F of microbatch 0, which now comes after that B.
  auto& ops = s.ops[0];
  const auto first_b = std::find_if(ops.begin(), ops.end(), [](const Op& op) { return op.kind == OpKind::kB; });
  ASSERT_NE(first_b, ops.end());
  std::rotate(ops.begin(), first_b, first_b + 1);
  std::atomic<bool> never{false};
  int deadlocks = 0;
  for (const Diagnostic& d : Validate(s, &never)) deadlocks += d.code == DiagCode::kDeadlock;
  EXPECT_EQ(deadlocks, 1);
}

}  // namespace
}  // namespace stagecraft::schedules
