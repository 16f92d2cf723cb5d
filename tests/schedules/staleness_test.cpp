// Weight delays (staleness.h) against the papers' closed forms: synchronous schedules train on
// the weights synchronous SGD would use; PipeDream's stage s of p is p − 1 − s updates behind once
// its pipeline is full (Harlap et al., SOSP'19: with 1F1B a microbatch's forward at stage s comes
// p − 1 − s updates of the stage before its own), and the same for its backward (weight
// stashing); with vertical sync every stage is p − 1 behind; PipeDream-2BW's every stage 1
// (Narayanan et al., ICML'21 §3.1: W(t+1) = W(t) − lr·∇f(W(t−1))).
#include "stagecraft/schedules/staleness.h"

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "generator_cases.h"
#include "stagecraft/schedules/generators.h"
#include "trace_cases.h"

namespace stagecraft::schedules {
namespace {

std::vector<StageDelay> DelaysOf(const std::string& name, int ranks, int microbatches, int steps, bool vertical = false) {
  GeneratorParams p = test_cases::Params(ranks, microbatches, steps, name == "interleaved" ? 2 : 1);
  p.vertical_sync = vertical;
  const std::vector<StageDelay> d = WeightDelays(Generate(name, p));
  EXPECT_EQ(static_cast<int>(d.size()), ranks * p.chunks);
  return d;
}

TEST(WeightDelays, SynchronousSchedulesAreNeverBehind) {
  for (const std::string name : {"gpipe", "1f1b", "interleaved", "zb-h1", "zb-h2"}) {
    SCOPED_TRACE(name);
    for (const StageDelay& d : DelaysOf(name, 4, 8, 2)) {
      EXPECT_EQ(d.forward, 0) << "stage " << d.stage;
      EXPECT_EQ(d.backward, 0) << "stage " << d.stage;
      EXPECT_FALSE(d.differ);
    }
  }
}

TEST(WeightDelays, PipeDreamStageSIsPMinusOneMinusSBehind) {
  for (const int p : {2, 4, 6}) {
    SCOPED_TRACE(p);
    const std::vector<StageDelay> d = DelaysOf("pipedream", p, 4 * p, 1);
    for (int s = 0; s < p; ++s) {
      EXPECT_EQ(d[static_cast<size_t>(s)].forward, p - 1 - s) << "stage " << s;
      EXPECT_EQ(d[static_cast<size_t>(s)].backward, p - 1 - s) << "stage " << s;
      EXPECT_FALSE(d[static_cast<size_t>(s)].differ) << "weight stashing: the backward reads its forward's version";
    }
  }
}

TEST(WeightDelays, VerticalSyncPutsEveryStageAsFarBehindAsTheFirst) {
  const std::vector<StageDelay> d = DelaysOf("pipedream", 4, 16, 1, true);
  for (const StageDelay& s : d) {
    EXPECT_EQ(s.forward, 3) << "stage " << s.stage;
    EXPECT_EQ(s.backward, 3) << "stage " << s.stage;
  }
}

TEST(WeightDelays, TwoBwIsOneUpdateBehindFromItsSecondStep) {
  for (const StageDelay& d : DelaysOf("2bw", 4, 8, 3)) {
    EXPECT_EQ(d.forward, 1) << "stage " << d.stage;
    EXPECT_EQ(d.backward, 1) << "stage " << d.stage;
    EXPECT_FALSE(d.differ);
  }
  for (const StageDelay& d : DelaysOf("2bw", 4, 8, 1)) EXPECT_EQ(d.forward, 0) << "one step: version 0 throughout";
}

// PipeMare (Yang et al., MLSys'21) runs PipeDream's order without the stash: the forward is as far
// behind as PipeDream's, p − 1 − s, and the backward reads the newest weights, none behind; the
// two differ on every stage but the last, whose forward and backward are back to back.
TEST(WeightDelays, PipeMareForwardIsBehindItsBackwardIsNot) {
  for (const int p : {2, 4}) {
    SCOPED_TRACE(p);
    const std::vector<StageDelay> d = DelaysOf("pipemare", p, 4 * p, 2);
    for (int s = 0; s < p; ++s) {
      EXPECT_EQ(d[static_cast<size_t>(s)].forward, p - 1 - s) << "stage " << s;
      EXPECT_EQ(d[static_cast<size_t>(s)].backward, 0) << "stage " << s;
      EXPECT_EQ(d[static_cast<size_t>(s)].differ, s < p - 1) << "stage " << s;
    }
  }
}

// The updates a PipeMare backward spans: microbatch g of stage s of p (one stage per rank) reads
// its forward's version max(0, g − (p − 1 − s)) and the newest, g, so it spans min(g, p − 1 − s);
// every other op, and every op of a stashing schedule, spans none.
TEST(CorrectionSpans, PipeMareBackwardSpansTheUpdatesSinceItsForward) {
  const int p = 4, m = 6;
  const Schedule s = Generate("pipemare", test_cases::Params(p, m, 1));
  for (int rank = 0; rank < p; ++rank) {
    const std::vector<int> spans = CorrectionSpans(s, rank);
    ASSERT_EQ(spans.size(), s.ops[rank].size());
    int backwards = 0;
    for (size_t i = 0; i < spans.size(); ++i) {
      const Op& op = s.ops[rank][i];
      if (op.kind != OpKind::kB) {
        EXPECT_EQ(spans[i], 0) << ActionString(op, m);
        continue;
      }
      ++backwards;
      EXPECT_EQ(spans[i], std::min(op.microbatch, p - 1 - rank)) << "rank " << rank << " " << ActionString(op, m);
    }
    EXPECT_EQ(backwards, m);
  }
  const Schedule stash = Generate("pipedream", test_cases::Params(p, m, 1));
  for (int rank = 0; rank < p; ++rank) {
    for (const int span : CorrectionSpans(stash, rank)) EXPECT_EQ(span, 0);
  }
}

// A trace's summary carries them (the viewer's tooltip reads them there).
TEST(WeightDelays, ATracesSummaryCarriesThem) {
  ScheduleMetrics m;
  m.schedule = "pipedream";
  m.ranks = 2;
  m.ranks_detail.resize(2);
  m.ranks_detail[1].rank = 1;
  m.stage_costs.resize(2);
  m.weight_delays = DelaysOf("pipedream", 2, 4, 1);
  const std::optional<ScheduleMetrics> read = test_cases::SummaryThroughATrace(m, "predicted");
  ASSERT_TRUE(read);
  EXPECT_EQ(read->weight_delays, m.weight_delays);
  EXPECT_EQ(read->weight_delays[0].forward, 1);
}

}  // namespace
}  // namespace stagecraft::schedules
