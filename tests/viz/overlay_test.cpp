// Tests for viz/src/overlay.cpp: two hand-made traces of one schedule whose measured times are
// known shifts of the predicted ones, so offset, per-op differences and the disagreement order
// are worked out by hand; refusals for different schedules and rank counts; unmatched ops.
#include "stagecraft/viz/overlay.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace stagecraft::viz {
namespace {

using schedules::Op;
using schedules::OpKind;
using schedules::Stream;
using schedules::TraceOp;

TraceOp At(int rank, Stream stream, OpKind kind, int microbatch, int op_index, int64_t start_ns, int64_t end_ns) {
  TraceOp t;
  t.rank = rank;
  t.stream = stream;
  t.op = Op{kind, rank, microbatch, 0, 0, -1};
  t.op_index = op_index;
  t.start_ns = start_ns;
  t.duration_ns = end_ns - start_ns;
  return t;
}

std::shared_ptr<const LoadedTrace> Load(const std::string& source, const std::string& schedule,
                                        const std::vector<TraceOp>& ops) {
  schedules::Trace trace;
  trace.source = source;
  trace.schedule = schedule;
  trace.ops = ops;
  LoadResult r = LoadTraceText(schedules::TraceToJson(trace), source + ".json");
  EXPECT_EQ(r.error, "");
  return r.trace;
}

// Predicted op p (index in this list) and its measured twin; the first compute op starts at
// 100 predicted and 1100 measured, so offset = 1000. Differences (start, duration) and
// disagreement per predicted op:
//   p0 r0 F0     [100,200]  vs [1100,1200]  (0, 0)    0
//   p1 r0 SEND_F [200,210]  vs [1200,1230]  (0, 20)   20
//   p2 r0 F1     [200,300]  vs [1205,1335]  (5, 30)   35
//   p3 r1 RECV_F [200,215]  vs [1190,1220]  (-10, 15) 25
//   p4 r1 F0     [215,315]  vs [1220,1310]  (5, -10)  15
//   p5 r0 W0     [300,310]  only predicted
std::vector<TraceOp> PredictedOps() {
  return {At(0, Stream::kCompute, OpKind::kF, 0, 0, 100, 200),   At(0, Stream::kSend, OpKind::kSendF, 0, 1, 200, 210),
          At(0, Stream::kCompute, OpKind::kF, 1, 2, 200, 300),   At(1, Stream::kRecv, OpKind::kRecvF, 0, 0, 200, 215),
          At(1, Stream::kCompute, OpKind::kF, 0, 1, 215, 315),   At(0, Stream::kCompute, OpKind::kW, 0, 3, 300, 310)};
}

// The measured ops in another order (by rank 1 first), plus one op only measured (m5).
std::vector<TraceOp> MeasuredOps() {
  return {At(1, Stream::kCompute, OpKind::kF, 0, 1, 1220, 1310), At(1, Stream::kRecv, OpKind::kRecvF, 0, 0, 1190, 1220),
          At(0, Stream::kCompute, OpKind::kF, 1, 2, 1205, 1335), At(0, Stream::kCompute, OpKind::kF, 0, 0, 1100, 1200),
          At(0, Stream::kSend, OpKind::kSendF, 0, 1, 1200, 1230), At(1, Stream::kCompute, OpKind::kB, 0, 2, 1310, 1400)};
}

TEST(Overlay, OffsetAlignsTheFirstStep) {
  const Overlay o = MatchTraces(*Load("predicted", "1f1b", PredictedOps()), *Load("measured", "1f1b", MeasuredOps()));
  EXPECT_EQ(o.error, "");
  EXPECT_EQ(o.offset_ns, 1000);
}

TEST(Overlay, MatchesByRankAndOpIndexInPredictedOrder) {
  const Overlay o = MatchTraces(*Load("predicted", "1f1b", PredictedOps()), *Load("measured", "1f1b", MeasuredOps()));
  ASSERT_EQ(o.matched.size(), 5u);
  const std::vector<int> want_measured = {3, 4, 2, 1, 0};
  const std::vector<int64_t> want_start = {0, 0, 5, -10, 5};
  const std::vector<int64_t> want_duration = {0, 20, 30, 15, -10};
  const std::vector<int64_t> want_disagreement = {0, 20, 35, 25, 15};
  for (int k = 0; k < 5; ++k) {
    EXPECT_EQ(o.matched[k].predicted, k);
    EXPECT_EQ(o.matched[k].measured, want_measured[k]) << k;
    EXPECT_EQ(o.matched[k].start_diff_ns, want_start[k]) << k;
    EXPECT_EQ(o.matched[k].duration_diff_ns, want_duration[k]) << k;
    EXPECT_EQ(o.matched[k].Disagreement(), want_disagreement[k]) << k;
  }
  EXPECT_EQ(o.match_of_predicted, (std::vector<int>{0, 1, 2, 3, 4, -1}));
  EXPECT_EQ(o.match_of_measured, (std::vector<int>{4, 3, 2, 0, 1, -1}));
}

TEST(Overlay, SortedByDisagreementLargestFirst) {
  const Overlay o = MatchTraces(*Load("predicted", "1f1b", PredictedOps()), *Load("measured", "1f1b", MeasuredOps()));
  EXPECT_EQ(o.by_disagreement, (std::vector<int>{2, 3, 1, 4, 0}));
}

TEST(Overlay, OpsInOneTraceOnlyAreCounted) {
  const Overlay o = MatchTraces(*Load("predicted", "1f1b", PredictedOps()), *Load("measured", "1f1b", MeasuredOps()));
  EXPECT_EQ(o.unmatched_predicted, 1);
  EXPECT_EQ(o.unmatched_measured, 1);
}

TEST(Overlay, SameKeyButDifferentOpIsNotAMatch) {
  std::vector<TraceOp> measured = MeasuredOps();
  measured[2].op.microbatch = 3;  // (rank 0, op_index 2) is F1 predicted, F3 here
  const Overlay o = MatchTraces(*Load("predicted", "1f1b", PredictedOps()), *Load("measured", "1f1b", measured));
  EXPECT_EQ(o.matched.size(), 4u);
  EXPECT_EQ(o.unmatched_predicted, 2);
  EXPECT_EQ(o.unmatched_measured, 2);
  EXPECT_EQ(o.match_of_predicted[2], -1);
  EXPECT_EQ(o.match_of_measured[2], -1);
}

TEST(Overlay, IdenticalTracesAgreeEverywhere) {
  const auto t = Load("predicted", "gpipe", PredictedOps());
  const Overlay o = MatchTraces(*t, *t);
  EXPECT_EQ(o.offset_ns, 0);
  ASSERT_EQ(o.matched.size(), 6u);
  for (const MatchedOp& m : o.matched) EXPECT_EQ(m.Disagreement(), 0);
  EXPECT_EQ(o.by_disagreement, (std::vector<int>{0, 1, 2, 3, 4, 5}));  // ties keep predicted order
}

TEST(Overlay, DifferentSchedulesAreRefused) {
  const Overlay o = MatchTraces(*Load("predicted", "gpipe", PredictedOps()), *Load("measured", "1f1b", MeasuredOps()));
  EXPECT_EQ(o.error, "cannot overlay: predicted is gpipe, measured is 1f1b");
  EXPECT_TRUE(o.matched.empty());
}

TEST(Overlay, DifferentRankCountsAreRefused) {
  std::vector<TraceOp> measured = MeasuredOps();
  measured[5].rank = 2;
  const Overlay o = MatchTraces(*Load("predicted", "1f1b", PredictedOps()), *Load("measured", "1f1b", measured));
  EXPECT_EQ(o.error, "cannot overlay: predicted has 2 ranks, measured has 3");
  EXPECT_TRUE(o.matched.empty());
}

}  // namespace
}  // namespace stagecraft::viz

namespace stagecraft::viz {
namespace {

TraceOp AtStep(int step, int op_index, int64_t start_ns, int64_t end_ns) {
  TraceOp t = At(0, Stream::kCompute, OpKind::kF, 0, op_index, start_ns, end_ns);
  t.op.step = step;
  return t;
}

// Two steps; the measured step 0 runs 50 ns longer, so its step 1 starts 50 ns later. Within
// each step the ops sit where predicted, so every start difference is 0 (aligned at each step's
// start), and the measured step-1 op that really starts 7 ns late shows exactly 7.
//   predicted: s0 [0,100]            s1 [100,200], [200,300]
//   measured:  s0 [1000,1150] (+50)  s1 [1150,1250], [1257,1357]
TEST(Overlay, StartDifferencesAreTakenFromEachStepsStart) {
  const auto p = Load("predicted", "1f1b", {AtStep(0, 0, 0, 100), AtStep(1, 1, 100, 200), AtStep(1, 2, 200, 300)});
  const auto m = Load("measured", "1f1b", {AtStep(0, 0, 1000, 1150), AtStep(1, 1, 1150, 1250), AtStep(1, 2, 1257, 1357)});
  const Overlay o = MatchTraces(*p, *m);
  ASSERT_EQ(o.error, "");
  EXPECT_EQ(o.offset_ns, 1000);  // drawn aligned at the first step
  ASSERT_EQ(o.matched.size(), 3u);
  EXPECT_EQ(o.matched[0].start_diff_ns, 0);
  EXPECT_EQ(o.matched[0].duration_diff_ns, 50);
  EXPECT_EQ(o.matched[1].start_diff_ns, 0);   // not 50: the step-0 error is not counted again
  EXPECT_EQ(o.matched[2].start_diff_ns, 7);
}

}  // namespace
}  // namespace stagecraft::viz
