// Tests for schedules/src/trace_check.cpp: a trace read in full (the first unusable event named)
// and held against the schedule it ran, on GPipe with 2 ranks and 1 microbatch, lowered by hand:
// rank 0 runs RECV_B, F, SEND_F, B, STEP and rank 1 RECV_F, F, B, SEND_B, STEP.
#include "stagecraft/schedules/trace_check.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "fuzz_corpus.h"
#include "stagecraft/schedules/generators.h"
#include "stagecraft/schedules/lower.h"
#include "trace_cases.h"

namespace stagecraft::schedules {
namespace {

using test_cases::ErrorOf;
using test_cases::OneEventTrace;

Schedule Gpipe() {
  GeneratorParams p;
  p.ranks = 2;
  p.microbatches = 1;
  return Lower(Generate("gpipe", p), P2p::kAhead);
}

// Every op of `s`, 1 us each, one after the other on its rank.
Trace FullTrace(const Schedule& s) {
  Trace t;
  t.source = "measured";
  t.schedule = s.name;
  for (int r = 0; r < s.ranks(); ++r) {
    for (int i = 0; i < static_cast<int>(s.ops[r].size()); ++i) {
      const OpKind kind = s.ops[r][i].kind;
      const Stream stream = kind == OpKind::kSendF || kind == OpKind::kSendB   ? Stream::kSend
                            : kind == OpKind::kRecvF || kind == OpKind::kRecvB ? Stream::kRecv
                                                                               : Stream::kCompute;
      t.ops.push_back(test_cases::MakeOp(r, stream, s.ops[r][i], i, 1000 * i, 1000));
    }
  }
  return t;
}

// Removes rank `rank`'s op at `index` from the trace.
Trace Without(Trace t, int rank, int index) {
  std::erase_if(t.ops, [&](const TraceOp& op) { return op.rank == rank && op.op_index == index; });
  return t;
}

TEST(CheckTraceOfSchedule, AFullTraceAndOneWithoutItsTransfersOrStepsPass) {
  const Schedule s = Gpipe();
  ASSERT_EQ(s.ops[0].size(), 5u);
  ASSERT_EQ(s.ops[1][2].kind, OpKind::kB);
  EXPECT_NO_THROW(CheckTraceOfSchedule(s, FullTrace(s), "t.json"));
  // A SEND and a STEP are not compute ops: a trace may lack them (their times are then modelled).
  EXPECT_NO_THROW(CheckTraceOfSchedule(s, Without(Without(FullTrace(s), 0, 2), 0, 4), "t.json"));
}

TEST(CheckTraceOfSchedule, AMissingComputeOpIsNamed) {
  const Schedule s = Gpipe();
  EXPECT_EQ(ErrorOf([&] { CheckTraceOfSchedule(s, Without(FullTrace(s), 1, 2), "t.json"); }),
            "t.json: rank 1 op 2 (B of stage 1, microbatch 0, step 0) of gpipe is not in the trace: a replay needs "
            "every compute op of the run");
  EXPECT_EQ(ErrorOf([&] { CheckTraceOfSchedule(s, Without(Without(FullTrace(s), 1, 2), 0, 1), "t.json"); }),
            "t.json: rank 0 op 1 (F of stage 0, microbatch 0, step 0) of gpipe is not in the trace (nor 1 more): a "
            "replay needs every compute op of the run");
  Trace empty = FullTrace(s);
  empty.ops.clear();
  EXPECT_EQ(ErrorOf([&] { CheckTraceOfSchedule(s, empty, "t.json"); }),
            "t.json: no op in traceEvents: a trace of gpipe holds its 4 compute ops");
}

TEST(CheckTraceOfSchedule, AStrayOrRepeatedOpIsNamed) {
  const Schedule s = Gpipe();
  Trace twice = FullTrace(s);
  twice.ops.push_back(twice.ops[1]);
  EXPECT_EQ(ErrorOf([&] { CheckTraceOfSchedule(s, twice, "t.json"); }),
            "t.json: rank 0 op 1 (F of stage 0, microbatch 0, step 0) appears twice");
  Trace other = FullTrace(s);
  other.ops[6].op.kind = OpKind::kB;  // rank 1's op 1 is its F
  EXPECT_EQ(ErrorOf([&] { CheckTraceOfSchedule(s, other, "t.json"); }),
            "t.json: rank 1 op 1 (B of stage 1, microbatch 0, step 0) is not gpipe's op at that index: the trace is "
            "not of this schedule as the scenario lowers it");
  Trace past = FullTrace(s);
  past.ops[0].op_index = 5;
  EXPECT_NE(ErrorOf([&] { CheckTraceOfSchedule(s, past, "t.json"); }).find("rank 0 op 5 (RECV_B"), std::string::npos);
}

// What the lenient read skips, the read in full refuses, naming the first such event.
TEST(TraceFromJsonInFull, TheFirstUnusableEventIsNamed) {
  EXPECT_EQ(ErrorOf([] {
              TraceFromJsonInFull(test_cases::FuzzCorpusText("trace", "skip-dur-negative.json"), "neg.json");
            }),
            "neg.json: event 2: \"dur\" is negative (-5)");
  const auto op = [](const std::string& dur) {
    return R"({"ph":"X","pid":0,"tid":0,"ts":1,"dur":)" + dur +
           R"(,"args":{"kind":"F","stage":0,"microbatch":0,"step":0,"op_index":0}})";
  };
  EXPECT_EQ(ErrorOf([&] { TraceFromJsonInFull(OneEventTrace(op("\"abc\"")), "a.json"); }),
            "a.json: event 0: \"dur\" is not a number (\"abc\")");
  EXPECT_EQ(ErrorOf([&] { TraceFromJsonInFull(OneEventTrace(op("1e400")), "b.json"); }),
            "b.json: event 0: \"dur\" is out of range (a number beyond a double)");
  EXPECT_EQ(ErrorOf([&] { TraceFromJsonInFull(OneEventTrace(op("1") + "," + op("-1") + "," + op("-2")), "c.json"); }),
            "c.json: event 1: \"dur\" is negative (-1) (and 1 more unusable event(s))");
  const Trace good = TraceFromJsonInFull(OneEventTrace(op("2.5")), "d.json");
  ASSERT_EQ(good.ops.size(), 1u);
  EXPECT_EQ(good.ops[0].duration_ns, 2500);
}

// The trace fuzz harness's replay seeds (tests/fuzz/corpus/trace/replay-*.json, made from the
// simulated gpipe.json of 2 ranks and 2 microbatches): the seed itself is its schedule op for op,
// and each broken copy stops where it was broken (its rank 0's op 6, the B of microbatch 0).
TEST(CheckTraceOfSchedule, TheFuzzSeedsStopWhereTheyAreBroken) {
  GeneratorParams p;
  p.ranks = 2;
  p.microbatches = 2;
  const Schedule s = Lower(Generate("gpipe", p), P2p::kAhead);
  const auto read = [](const char* name) {
    return TraceFromJsonInFull(test_cases::FuzzCorpusText("trace", name), name);
  };
  EXPECT_NO_THROW(CheckTraceOfSchedule(s, read("gpipe.json"), "gpipe.json"));
  EXPECT_EQ(ErrorOf([&] { CheckTraceOfSchedule(s, read("replay-dropped-op.json"), "d.json"); }),
            "d.json: rank 0 op 6 (B of stage 0, microbatch 0, step 0) of gpipe is not in the trace: a replay needs "
            "every compute op of the run");
  EXPECT_EQ(ErrorOf([&] { CheckTraceOfSchedule(s, read("replay-empty-events.json"), "e.json"); }),
            "e.json: no op in traceEvents: a trace of gpipe holds its 8 compute ops");
  EXPECT_EQ(ErrorOf([&] { read("replay-dur-negative.json"); }),
            "replay-dur-negative.json: event 14: \"dur\" is negative (-5)");
}

}  // namespace
}  // namespace stagecraft::schedules
