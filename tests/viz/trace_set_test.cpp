// Tests for viz/src/trace_set.cpp: a hand-written trace indexed into lanes, prefix maxima, memory
// and step starts worked out by hand; summary and names read with it; one-line errors; fields
// ignored or skipped; and the bubble split under the shape the header states.
#include "stagecraft/viz/trace_set.h"

#include "../schedules/bubble_split_cases.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace stagecraft::viz {
namespace {

using schedules::Stream;

// Times in microseconds. Op i is the i-th event below:
//   rank 0 compute: 0 [10,14]  1 [2,5]  2 [30,36] (step 1)  3 [20,25] (step 1)
//   rank 0 send:    4 [5,25]   5 [14,15]
//   rank 1 recv:    6 [5.5,6]
//   rank 1 compute: 7 [6,9]    8 W [19.5,20.5] (step 1)   9 STEP [0.5,1.5]
constexpr std::string_view kTrace = R"({"traceEvents":[
{"ph":"M","name":"process_name","pid":0,"args":{"name":"rank 0"}},
{"ph":"X","name":"0F1","pid":0,"tid":0,"ts":10,"dur":4,"args":{"kind":"F","stage":0,"microbatch":1,"step":0,"op_index":2}},
{"ph":"X","name":"0F0","pid":0,"tid":0,"ts":2,"dur":3,"args":{"kind":"F","stage":0,"microbatch":0,"step":0,"op_index":0}},
{"ph":"X","name":"0B2","pid":0,"tid":0,"ts":30,"dur":6,"args":{"kind":"B","stage":0,"microbatch":0,"step":1,"op_index":5}},
{"ph":"X","name":"0F2","pid":0,"tid":0,"ts":20,"dur":5,"args":{"kind":"F","stage":0,"microbatch":0,"step":1,"op_index":4}},
{"ph":"X","name":"0SEND_F0","pid":0,"tid":1,"ts":5,"dur":20,"args":{"kind":"SEND_F","stage":0,"microbatch":0,"step":0,"peer":1,"op_index":1}},
{"ph":"X","name":"0SEND_F1","pid":0,"tid":1,"ts":14,"dur":1,"args":{"kind":"SEND_F","stage":0,"microbatch":1,"step":0,"peer":1,"op_index":3}},
{"ph":"X","name":"1RECV_F0","pid":1,"tid":2,"ts":5.5,"dur":0.5,"args":{"kind":"RECV_F","stage":1,"microbatch":0,"step":0,"peer":0,"op_index":0}},
{"ph":"X","name":"1F0","pid":1,"tid":0,"ts":6,"dur":3,"args":{"kind":"F","stage":1,"microbatch":0,"step":0,"op_index":1}},
{"ph":"X","name":"1W2","pid":1,"tid":0,"ts":19.5,"dur":1,"args":{"kind":"W","stage":1,"microbatch":0,"step":1,"op_index":2}},
{"ph":"X","name":"1STEP1","pid":1,"tid":0,"ts":0.5,"dur":1,"args":{"kind":"STEP","stage":1,"microbatch":0,"step":0,"version":1,"op_index":3}},
{"ph":"C","name":"memory","pid":1,"ts":9,"args":{"bytes":300}},
{"ph":"C","name":"memory","pid":1,"ts":2,"args":{"bytes":100}},
{"ph":"C","name":"memory","pid":0,"ts":1,"args":{"bytes":50}}
],
"stagecraft":{"source":"predicted","scenario":"hand","schedule":"1f1b","microbatches":2,"summary":{}}})";

std::shared_ptr<const LoadedTrace> MustLoad(std::string_view text, const std::string& path = "hand.json") {
  LoadResult r = LoadTraceText(text, path);
  EXPECT_EQ(r.error, "");
  if (!r.trace) ADD_FAILURE() << "no trace";
  return r.trace;
}

TEST(TraceSet, LanesSortedByStartPerRankAndStream) {
  const auto t = MustLoad(kTrace);
  ASSERT_TRUE(t);
  EXPECT_EQ(t->path, "hand.json");
  EXPECT_EQ(t->trace.schedule, "1f1b");
  EXPECT_EQ(t->skipped, 0);
  EXPECT_EQ(t->ranks, 2);
  ASSERT_EQ(t->lanes.size(), 4u);  // rank 0 has no recv lane, rank 1 no send lane: dropped
  const std::vector<std::pair<int, Stream>> want_keys = {
      {0, Stream::kCompute}, {0, Stream::kSend}, {1, Stream::kCompute}, {1, Stream::kRecv}};
  const std::vector<std::vector<int>> want_ops = {{1, 0, 3, 2}, {4, 5}, {9, 7, 8}, {6}};
  for (size_t k = 0; k < want_keys.size(); ++k) {
    EXPECT_EQ(t->lanes[k].rank, want_keys[k].first) << "lane " << k;
    EXPECT_EQ(t->lanes[k].stream, want_keys[k].second) << "lane " << k;
    EXPECT_EQ(t->lanes[k].ops, want_ops[k]) << "lane " << k;
  }
}

TEST(TraceSet, PrefixMaximumOfEndTimes) {
  const auto t = MustLoad(kTrace);
  ASSERT_TRUE(t);
  EXPECT_EQ(t->lanes[0].max_end_ns, (std::vector<int64_t>{5000, 14000, 25000, 36000}));
  // The long send [5,25] us outlasts the short one after it [14,15].
  EXPECT_EQ(t->lanes[1].max_end_ns, (std::vector<int64_t>{25000, 25000}));
  EXPECT_EQ(t->lanes[2].max_end_ns, (std::vector<int64_t>{1500, 9000, 20500}));
  EXPECT_EQ(t->lanes[3].max_end_ns, (std::vector<int64_t>{6000}));
}

TEST(TraceSet, ExtentAndStepStarts) {
  const auto t = MustLoad(kTrace);
  ASSERT_TRUE(t);
  EXPECT_EQ(t->start_ns, 500);  // the STEP op counts for the extent...
  EXPECT_EQ(t->end_ns, 36000);
  // ...but not for step starts: step 0 starts with rank 0's F at 2 us, step 1 with rank 1's W.
  EXPECT_EQ(t->step_start_ns, (std::vector<int64_t>{2000, 19500}));
}

TEST(TraceSet, MemoryCountersPerRankByTime) {
  const auto t = MustLoad(kTrace);
  ASSERT_TRUE(t);
  ASSERT_EQ(t->memory.size(), 2u);
  ASSERT_EQ(t->memory[0].size(), 1u);
  EXPECT_EQ(t->memory[0][0].time_ns, 1000);
  EXPECT_EQ(t->memory[0][0].memory_bytes, 50);
  ASSERT_EQ(t->memory[1].size(), 2u);
  EXPECT_EQ(t->memory[1][0].time_ns, 2000);
  EXPECT_EQ(t->memory[1][0].memory_bytes, 100);
  EXPECT_EQ(t->memory[1][1].time_ns, 9000);
  EXPECT_EQ(t->memory[1][1].memory_bytes, 300);
}

TEST(TraceSet, StepWithoutComputeTakesTheNextStepsStart) {
  const auto t = MustLoad(R"({"traceEvents":[
{"ph":"X","pid":0,"tid":0,"ts":7,"dur":1,"args":{"kind":"F","stage":0,"microbatch":0,"step":2,"op_index":0}},
{"ph":"X","pid":0,"tid":0,"ts":1,"dur":1,"args":{"kind":"STEP","stage":0,"microbatch":0,"step":0,"op_index":1}}]})");
  ASSERT_TRUE(t);
  EXPECT_EQ(t->step_start_ns, (std::vector<int64_t>{7000, 7000, 7000}));
}

TEST(TraceSet, EmptyTraceLoads) {
  const auto t = MustLoad(R"({"traceEvents":[]})");
  ASSERT_TRUE(t);
  EXPECT_EQ(t->ranks, 0);
  EXPECT_TRUE(t->lanes.empty());
  EXPECT_TRUE(t->step_start_ns.empty());
  EXPECT_EQ(t->start_ns, 0);
  EXPECT_EQ(t->end_ns, 0);
}

TEST(TraceSet, RoundTripsThroughTheWriter) {
  schedules::Trace trace;
  trace.schedule = "gpipe";
  schedules::TraceOp op;
  op.rank = 3;
  op.op = schedules::Op{schedules::OpKind::kB, 3, 1, 0, 0, -1};
  op.op_index = 7;
  op.start_ns = 1234567;
  op.duration_ns = 89;
  trace.ops.push_back(op);
  const auto t = MustLoad(schedules::TraceToJson(trace));
  ASSERT_TRUE(t);
  EXPECT_EQ(t->ranks, 4);
  ASSERT_EQ(t->lanes.size(), 1u);
  EXPECT_EQ(t->lanes[0].rank, 3);
  EXPECT_EQ(t->lanes[0].max_end_ns, (std::vector<int64_t>{1234656}));
  EXPECT_EQ(t->step_start_ns, (std::vector<int64_t>{1234567}));
}

// The summary panel's numbers come with the trace: its typed metrics, read leniently.
TEST(TraceSet, SummaryIsReadWithTheTrace) {
  const auto t = MustLoad(R"({"traceEvents":[],"stagecraft":{"schedule":"gpipe","summary":)"
                          R"({"step_time_ms":12.5,"per_rank":[{"busy_ms":"x"},{"busy_ms":3}],"losses":[3]}}})");
  ASSERT_TRUE(t && t->trace.summary);
  const schedules::ScheduleMetrics& s = *t->trace.summary;
  EXPECT_DOUBLE_EQ(s.step_time_ms, 12.5);
  ASSERT_EQ(s.ranks_detail.size(), 2u);
  EXPECT_EQ(s.ranks_detail[0].busy_ms, 0);  // ill-typed: the default
  EXPECT_EQ(s.ranks_detail[1].busy_ms, 3);
  ASSERT_TRUE(s.executor);
  EXPECT_EQ(s.executor->losses, (std::vector<double>{3}));
  EXPECT_FALSE(MustLoad(kTrace)->trace.summary);  // "summary":{}
}

// Quotes, backslashes, non-ASCII and control characters in the names come back exactly.
TEST(TraceSet, NamesThatNeedEscapingRoundTrip) {
  const std::string odd = "odd \"quoted\" back\\slash \xc3\xbc \xe2\x86\x92 tab\there \x01 end";
  schedules::Trace trace;
  trace.source = "measured";
  trace.scenario = odd;
  trace.schedule = "gpipe";
  trace.summary.emplace().schedule = odd;
  trace.summary->step_time_ms = 1.5;
  const auto t = MustLoad(schedules::TraceToJson(trace), odd + ".json");
  ASSERT_TRUE(t && t->trace.summary);
  EXPECT_EQ(t->path, odd + ".json");
  EXPECT_EQ(t->trace.scenario, odd);
  EXPECT_EQ(t->trace.summary->schedule, odd);
  EXPECT_EQ(t->trace.summary->step_time_ms, 1.5);
}

TEST(TraceSet, UnknownFieldsIgnoredAndIncompleteEventsSkipped) {
  // foreign.json: two usable ops with extra fields, and four events missing a needed field
  // (a tid out of range, no kind, an unknown kind, a counter without byte count).
  const LoadResult r = LoadTraceFile(std::string(STAGECRAFT_TEST_DATA) + "/traces/foreign.json");
  ASSERT_TRUE(r.trace) << r.error;
  EXPECT_EQ(r.trace->skipped, 4);
  EXPECT_EQ(r.trace->trace.ops.size(), 2u);
  EXPECT_EQ(r.trace->ranks, 2);
  ASSERT_EQ(r.trace->lanes.size(), 2u);
  EXPECT_EQ(r.trace->lanes[0].rank, 0);
  EXPECT_EQ(r.trace->lanes[1].stream, Stream::kSend);
  EXPECT_EQ(r.trace->memory[1].size(), 1u);
}

TEST(TraceSet, MissingFieldsCountedAsSkipped) {
  const auto t = MustLoad(R"({"traceEvents":[
{"ph":"X","pid":0,"tid":0,"ts":1,"dur":1,"args":{"kind":"F","stage":0,"microbatch":0,"step":0,"op_index":0},"color":"red"},
{"ph":"X","pid":0,"tid":0,"ts":2,"args":{"kind":"F","stage":0,"microbatch":1,"step":0,"op_index":1}},
{"ph":"X","pid":0,"tid":0,"ts":3,"dur":1,"args":{"kind":"F","stage":0,"step":0,"op_index":2}}]})");
  ASSERT_TRUE(t);
  EXPECT_EQ(t->skipped, 2);
  EXPECT_EQ(t->first_skipped, "event 1: \"dur\" is missing");
  EXPECT_EQ(t->trace.ops.size(), 1u);
}

TEST(TraceSet, MissingFileIsAOneLineError) {
  const LoadResult r = LoadTraceFile("/nonexistent/dir/trace.json");
  EXPECT_FALSE(r.trace);
  EXPECT_EQ(r.error, "/nonexistent/dir/trace.json: cannot read: no such file or directory");
}

TEST(TraceSet, DirectoryIsAnError) {
  const LoadResult r = LoadTraceFile(STAGECRAFT_TEST_DATA);
  EXPECT_FALSE(r.trace);
  EXPECT_EQ(r.error, std::string(STAGECRAFT_TEST_DATA) + ": cannot read: is a directory");
}

TEST(TraceSet, TruncatedFileIsAOneLineErrorNamingThePath) {
  const std::string path =
      (std::filesystem::temp_directory_path() / ("viz_truncated_" + std::to_string(::getpid()) + ".json")).string();
  {
    std::ofstream out(path, std::ios::binary);
    out << kTrace.substr(0, kTrace.size() / 2);
  }
  const LoadResult r = LoadTraceFile(path);
  std::filesystem::remove(path);
  EXPECT_FALSE(r.trace);
  EXPECT_EQ(r.error.rfind(path + ": not valid JSON: ", 0), 0u) << r.error;
  EXPECT_EQ(r.error.find('\n'), std::string::npos);
}

TEST(TraceSet, TextThatIsNotATraceIsAnError) {
  const LoadResult r = LoadTraceText(R"({"events":[]})", "x.json");
  EXPECT_FALSE(r.trace);
  EXPECT_EQ(r.error, "x.json: not a trace (no traceEvents array)");
}

TEST(TraceSet, HugeRankIsRefusedNotAllocated) {
  const LoadResult r = LoadTraceText(R"({"traceEvents":[
{"ph":"X","pid":2000000000,"tid":0,"ts":1,"dur":1,"args":{"kind":"F","stage":0,"microbatch":0,"step":0,"op_index":0}}]})",
                                     "big.json");
  EXPECT_FALSE(r.trace);
  EXPECT_EQ(r.error, "big.json: rank 2000000000 is out of range (at most 1048576 ranks)");
}

}  // namespace
}  // namespace stagecraft::viz

namespace stagecraft::viz {
namespace {

// The bubble view's split, read off a trace file, equals the split of the run record the trace
// was written from (shape read back from the trace, ops put back in IR order): GPipe on 2
// ranks (tests/schedules/bubble_split_cases.h), whose rank 1 has gaps of every cause.
TEST(TraceSetBubbles, SplitFromTheTraceEqualsTheRecords) {
  using namespace stagecraft::schedules;
  constexpr int64_t kMs = test_cases::kSplitMs;
  const auto [s, r] = test_cases::HandWorkedTimeline();
  const LoadResult loaded = LoadTraceText(TraceToJson(BuildTrace(s, r, "hand", "measured", std::nullopt)), "t.json");
  ASSERT_TRUE(loaded.trace) << loaded.error;
  EXPECT_EQ(loaded.trace->trace.shape, s.shape);  // stated by the header, not read off the ops
  const std::vector<RankSplit> want = SplitBubbles(s, r, true);
  ASSERT_EQ(loaded.trace->split.size(), want.size());
  for (size_t k = 0; k < want.size(); ++k) {
    const RankSplit& got = loaded.trace->split[k];
    EXPECT_EQ(got.compute_ns, want[k].compute_ns) << "rank " << k;
    EXPECT_EQ(got.wait_ns, want[k].wait_ns) << "rank " << k;
    EXPECT_EQ(got.transfer_ns, want[k].transfer_ns) << "rank " << k;
    EXPECT_EQ(got.overhead_ns, want[k].overhead_ns) << "rank " << k;
    EXPECT_EQ(got.idle_ns, want[k].idle_ns) << "rank " << k;
    ASSERT_EQ(got.gaps.size(), want[k].gaps.size()) << "rank " << k;
    for (size_t g = 0; g < want[k].gaps.size(); ++g) EXPECT_EQ(got.gaps[g].cause, want[k].gaps[g].cause);
  }
  EXPECT_EQ(want[1].wait_ns, 2 * kMs);  // the hand-worked gap is there at all
  EXPECT_EQ(want[1].transfer_ns, 3 * kMs);
}

// A run with 2 replicas (tests/schedules/bubble_split_cases.h: one rank, two stages): its
// REDUCE_GRADs get a collective lane of their own, sorted by start, and the bubble view's split
// has the 2 ms a STEP waited for its REDUCE_GRAD as collective, at [8,10] ms. A trace without
// REDUCE_GRADs has no such lane.
TEST(TraceSetBubbles, ReduceGradsHaveACollectiveLaneAndPart) {
  using namespace stagecraft::schedules;
  constexpr int64_t kMs = test_cases::kSplitMs;
  const auto [s, r] = test_cases::ReplicatedTimeline();
  const auto t = MustLoad(TraceToJson(BuildTrace(s, r, "hand", "predicted", std::nullopt)));
  ASSERT_TRUE(t);
  EXPECT_TRUE(HasLane(*t, Stream::kCollective));
  ASSERT_EQ(t->lanes.size(), 2u);  // compute and collective; no send or recv on one rank
  const Lane& lane = t->lanes[1];
  EXPECT_EQ(lane.stream, Stream::kCollective);
  ASSERT_EQ(lane.ops.size(), 2u);
  EXPECT_EQ(t->trace.ops[lane.ops[0]].op.stage, 1);  // [4,6] before stage 0's [7,10]
  EXPECT_EQ(t->trace.ops[lane.ops[1]].op.stage, 0);
  EXPECT_EQ(lane.max_end_ns, (std::vector<int64_t>{6 * kMs, 10 * kMs}));
  ASSERT_EQ(t->split.size(), 1u);
  EXPECT_EQ(t->split[0].collective_ns, 2 * kMs);
  EXPECT_EQ(t->split[0].overhead_ns, 1 * kMs);
  EXPECT_EQ(t->split[0].compute_ns, 8 * kMs);
  const auto one = MustLoad(kTrace);
  ASSERT_TRUE(one);
  EXPECT_FALSE(HasLane(*one, Stream::kCollective));
  EXPECT_TRUE(HasLane(*one, Stream::kRecv));
}

// Rank 1 of a 3-rank pipeline whose other ranks left nothing (times in us): 1F0 [0,1], its
// 1RECV_B0 posted at 1 and arrived at 5, 1B0 [6,8]. Stated as 3 ranks, B's input comes from
// stage 2 over the wire: the gap [1,6] is transfer until 5, then overhead. Without the
// statement the ops read as 2 ranks, where stage 1 is the last and B's input is its own: all
// of the gap is overhead.
TEST(TraceSetBubbles, TheStatedShapeDecidesWhereInputsComeFrom) {
  const std::string events = R"({"traceEvents":[
{"ph":"X","pid":1,"tid":0,"ts":0,"dur":1,"args":{"kind":"F","stage":1,"microbatch":0,"step":0,"op_index":0}},
{"ph":"X","pid":1,"tid":2,"ts":1,"dur":4,"args":{"kind":"RECV_B","stage":1,"microbatch":0,"step":0,"peer":2,"op_index":1}},
{"ph":"X","pid":1,"tid":0,"ts":6,"dur":2,"args":{"kind":"B","stage":1,"microbatch":0,"step":0,"op_index":2}}
])";
  const auto stated = MustLoad(events + R"(,"stagecraft":{"ranks":3,"chunks":1,"placement":"loop"}})");
  const auto read_off = MustLoad(events + "}");
  ASSERT_TRUE(stated && read_off);
  EXPECT_EQ(stated->shape, (schedules::Shape{3, 1, schedules::Placement::kLoop}));
  EXPECT_EQ(read_off->shape, (schedules::Shape{2, 1, schedules::Placement::kLoop}));
  ASSERT_EQ(stated->split.size(), 2u);  // ranks up to the highest with an op
  EXPECT_EQ(stated->split[1].compute_ns, 3000);
  EXPECT_EQ(stated->split[1].transfer_ns, 4000);
  EXPECT_EQ(stated->split[1].overhead_ns, 1000);
  EXPECT_EQ(stated->split[1].wait_ns, 0);
  ASSERT_EQ(read_off->split.size(), 2u);
  EXPECT_EQ(read_off->split[1].transfer_ns, 0);
  EXPECT_EQ(read_off->split[1].overhead_ns, 5000);
}

// A trace with copies (OFFLOAD / RELOAD) gives each direction a lane of its own, beside compute;
// the copies are not compute, so the rank's compute time is its F and B alone.
TEST(TraceSetCopies, CopiesHaveALanePerDirection) {
  using namespace stagecraft::schedules;
  Trace t;
  t.source = "predicted";
  t.schedule = "gpipe";
  t.microbatches = 1;
  t.ops.push_back({0, Stream::kCompute, Op{OpKind::kF, 0, 0, 0, 0}, 0, 0, 1000});
  t.ops.push_back({0, Stream::kToHost, Op{.kind = OpKind::kOffload, .tensor = Tensor::kActivations}, 1, 1000, 400});
  t.ops.push_back({0, Stream::kToDevice, Op{.kind = OpKind::kReload, .tensor = Tensor::kActivations}, 2, 1500, 400});
  t.ops.push_back({0, Stream::kCompute, Op{OpKind::kB, 0, 0, 0, 0}, 3, 2000, 2000});
  const auto loaded = MustLoad(TraceToJson(t));
  ASSERT_TRUE(loaded);
  EXPECT_TRUE(HasLane(*loaded, Stream::kToHost));
  EXPECT_TRUE(HasLane(*loaded, Stream::kToDevice));
  EXPECT_FALSE(HasLane(*loaded, Stream::kCollective));
  ASSERT_EQ(loaded->lanes.size(), 3u);
  EXPECT_EQ(loaded->lanes[1].stream, Stream::kToHost);
  EXPECT_EQ(loaded->lanes[2].stream, Stream::kToDevice);
  ASSERT_EQ(loaded->split.size(), 1u);
  EXPECT_EQ(loaded->split[0].compute_ns, 3000);
}

}  // namespace
}  // namespace stagecraft::viz
