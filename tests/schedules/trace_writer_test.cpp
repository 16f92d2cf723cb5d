// Tests for schedules/src/trace_writer.cpp: the exact text of a one-op trace and of the header
// with its stated shape, field-by-field round trips, escaping and UTF-8 repair, the summary's
// numbers in shortest form, and negative times or non-finite metrics as bugs.
#include "stagecraft/schedules/trace.h"

#include <cmath>
#include <string>

#include <gtest/gtest.h>

#include "trace_cases.h"

namespace stagecraft::schedules {
namespace {

using test_cases::ExpectSameTrace;
using test_cases::HandMadeTrace;
using test_cases::MakeOp;

TEST(TraceTest, ExactTextOfOneOpTrace) {
  Trace t;
  t.source = "predicted";
  t.scenario = "tiny";
  t.schedule = "1f1b";
  t.microbatches = 2;
  t.summary = test_cases::TwoRankMetrics();
  t.summary->throughput_samples_per_s = 0.0000125;
  t.summary->ranks_detail = {{1, 1e15, 0.25, 4096, 1, 1, false}};
  t.ops = {MakeOp(1, Stream::kCompute, Op{OpKind::kB, 1, 1, 1, 1, -1}, 3, 1234567, 1000)};
  t.counters = {{1, 5, 4096}};
  // Global microbatch 1 * 2 + 1 = 3; 1234567 ns = 1234.567 us; the summary's numbers are their
  // fixed-decimal text in shortest form (0.000013 -> 1.3e-05, 1e15 -> 1e+15). No shape: none
  // written.
  const std::string want =
      "{\"traceEvents\":[\n"
      "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":1,\"args\":{\"name\":\"rank 1\"}},\n"
      "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":1,\"tid\":0,\"args\":{\"name\":\"compute\"}},\n"
      "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":1,\"tid\":1,\"args\":{\"name\":\"send\"}},\n"
      "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":1,\"tid\":2,\"args\":{\"name\":\"recv\"}},\n"
      "{\"ph\":\"X\",\"name\":\"1B3\",\"cat\":\"B\",\"pid\":1,\"tid\":0,\"ts\":1234.567,\"dur\":1.000,"
      "\"args\":{\"kind\":\"B\",\"stage\":1,\"microbatch\":1,\"step\":1,\"version\":1,\"peer\":-1,\"op_index\":3}},\n"
      "{\"ph\":\"C\",\"name\":\"memory\",\"pid\":1,\"ts\":0.005,\"args\":{\"bytes\":4096}}\n"
      "],\n"
      "\"displayTimeUnit\":\"ns\",\n"
      "\"stagecraft\":{\"source\":\"predicted\",\"scenario\":\"tiny\",\"schedule\":\"1f1b\",\"microbatches\":2,"
      "\"summary\":{\"schedule\":\"1f1b\",\"ranks\":2,\"chunks\":1,\"microbatches\":8,\"microbatch_size\":4,\"steps\":2,"
      "\"makespan_ms\":66.0,\"step_time_ms\":33.0,\"throughput_samples_per_s\":1.3e-05,\"bubble_fraction\":0.272727273,"
      "\"oom\":false,\"per_rank\":[{\"rank\":1,\"busy_ms\":1e+15,\"span_ms\":0.25,"
      "\"compute_ms\":0.0,\"wait_ms\":0.0,\"transfer_ms\":0.0,\"overhead_ms\":0.0,\"idle_ms\":0.0,"
      "\"peak_memory_bytes\":4096,\"peak_inflight_microbatches\":1,\"peak_weight_versions\":1,\"oom\":false}]}}}\n";
  EXPECT_EQ(TraceToJson(t), want);
}

// A run with replicas: its REDUCE_GRADs go on stream 3, named "collective" on every rank; the
// same trace without them is written as before (no tid 3 at all).
TEST(TraceTest, ReduceGradsGoOnTheCollectiveStream) {
  Trace t;
  t.source = "predicted";
  t.schedule = "1f1b";
  t.microbatches = 2;
  t.ops = {MakeOp(0, Stream::kCompute, Op{OpKind::kB, 0, 1, 0, 0, -1}, 4, 1000, 500),
           MakeOp(0, Stream::kCollective, Op{OpKind::kReduceGrad, 0, 1, 0, 1, -1}, 5, 1500, 2250)};
  const std::string text = TraceToJson(t);
  EXPECT_NE(text.find(R"({"ph":"M","name":"thread_name","pid":0,"tid":3,"args":{"name":"collective"}},)" "\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find(R"({"ph":"X","name":"0REDUCE_GRAD1","cat":"REDUCE_GRAD","pid":0,"tid":3,)"
                      R"("ts":1.500,"dur":2.250,"args":{"kind":"REDUCE_GRAD","stage":0,"microbatch":1,)"
                      R"("step":0,"version":1,"peer":-1,"op_index":5}})"),
            std::string::npos)
      << text;
  const TraceReadResult read = TraceFromJson(text, "dp.json");
  EXPECT_EQ(read.skipped, 0);
  ExpectSameTrace(read.trace, t);
  ASSERT_EQ(read.trace.ops.size(), 2u);
  EXPECT_EQ(read.trace.ops[1].stream, Stream::kCollective);
  t.ops.pop_back();
  EXPECT_EQ(TraceToJson(t).find("\"tid\":3"), std::string::npos);
}

TEST(TraceTest, EmptyTraceIsValidAndReadsBack) {
  Trace t;
  t.source = "measured";
  const std::string text = TraceToJson(t);
  EXPECT_EQ(text.rfind("{\"traceEvents\":[\n],\n", 0), 0u) << text;
  const TraceReadResult read = TraceFromJson(text, "empty.json");
  ExpectSameTrace(read.trace, t);
  EXPECT_EQ(read.skipped, 0);
}

TEST(TraceTest, RoundTripKeepsEveryField) {
  const Trace t = HandMadeTrace();
  const std::string text = TraceToJson(t);
  const TraceReadResult read = TraceFromJson(text, "hand.json");
  EXPECT_EQ(read.skipped, 0);
  ExpectSameTrace(read.trace, t);
  // Names are PyTorch action strings with global microbatch step * 3 + microbatch.
  EXPECT_NE(text.find("\"name\":\"0F5\""), std::string::npos);
  EXPECT_NE(text.find("\"name\":\"12STEP3\""), std::string::npos);
  EXPECT_NE(text.find("\"ts\":999999999.999,\"dur\":0.007"), std::string::npos);
  EXPECT_NE(text.find("\"ts\":0.001,\"dur\":0.999"), std::string::npos);
  // Each name is the op's action string, next to its kind as category.
  for (const TraceOp& op : t.ops) {
    const std::string event = "\"name\":\"" + ActionString(op.op, t.microbatches) + "\",\"cat\":\"" +
                              std::string(KindName(op.op.kind)) + "\",\"pid\":" + std::to_string(op.rank);
    EXPECT_NE(text.find(event), std::string::npos) << event;
  }
  // Metadata only for ranks that appear: 0, 1 and 12.
  EXPECT_NE(text.find("\"pid\":12,\"args\":{\"name\":\"rank 12\"}"), std::string::npos);
  EXPECT_EQ(text.find("\"name\":\"rank 2\""), std::string::npos);
}

TEST(TraceTest, SerializationIsDeterministic) {
  const Trace t = HandMadeTrace();
  const Trace copy = t;
  const std::string first = TraceToJson(t);
  EXPECT_EQ(first, TraceToJson(t));
  EXPECT_EQ(first, TraceToJson(copy));
  // Written, read and written again: the same bytes.
  EXPECT_EQ(first, TraceToJson(TraceFromJson(first, "again.json").trace));
}

TEST(TraceTest, EscapesStrings) {
  Trace t;
  t.source = "predicted";
  t.scenario = "a \"quoted\" C:\\path\nnext\ttab";
  t.schedule = "1f1b\x01";
  const std::string text = TraceToJson(t);
  EXPECT_NE(text.find(R"("scenario":"a \"quoted\" C:\\path\nnext\ttab")"), std::string::npos) << text;
  EXPECT_NE(text.find(R"("schedule":"1f1b\u0001")"), std::string::npos) << text;
  const Trace read = TraceFromJson(text, "escaped.json").trace;
  EXPECT_EQ(read.scenario, t.scenario);
  EXPECT_EQ(read.schedule, t.schedule);
}

// Names with quotes, backslashes, non-ASCII and control characters, in the header and in the
// summary, come back exactly.
TEST(TraceTest, OddNamesRoundTrip) {
  const std::string odd = "odd \"quoted\" back\\slash \xc3\xbc \xe2\x86\x92 tab\there \x01\x1f/";
  Trace t = HandMadeTrace();
  t.scenario = odd;
  t.schedule = odd + "s";
  t.summary->schedule = odd + "m";
  const std::string text = TraceToJson(t);
  EXPECT_NE(text.find("\"scenario\":\"odd \\\"quoted\\\" back\\\\slash \xc3\xbc \xe2\x86\x92 tab\\there \\u0001\\u001F/\""),
            std::string::npos)
      << text.substr(text.find("\"stagecraft\""));
  const Trace read = TraceFromJson(text, "odd.json").trace;
  EXPECT_EQ(read.scenario, t.scenario);
  EXPECT_EQ(read.schedule, t.schedule);
  ASSERT_TRUE(read.summary.has_value());
  EXPECT_EQ(read.summary->schedule, t.summary->schedule);
}

// The summary's numbers are the metrics file's fixed-decimal text in shortest form.
TEST(TraceTest, SummaryNumbersInShortestForm) {
  const std::string text = TraceToJson(HandMadeTrace());
  for (const char* part : {R"("makespan_ms":66.0,"step_time_ms":33.0,"throughput_samples_per_s":969.69697,)",
                           R"("bubble_fraction":0.272727273,"oom":true,)",
                           R"({"rank":1,"busy_ms":48.000001,"span_ms":61.0,"compute_ms":48.000001,"wait_ms":12.0,)",
                           R"("transfer_ms":0.5,"overhead_ms":1e-06,"idle_ms":5.499998,"peak_memory_bytes":2048,)",
                           R"("losses":[0.587640123,2],)",
                           R"("overhead_ns_per_op":6543.2}}}
)"}) {
    EXPECT_NE(text.find(part), std::string::npos) << part;
  }
}

// The shortest form is the shortest text that reads back as the same double (0.23561, where a
// Grisu2 writer may give 0.23561000000000001), decimal from 1e-4 up to 1e15.
TEST(TraceTest, SummaryNumbersAtTheFormsEdges) {
  Trace t;
  t.summary = test_cases::TwoRankMetrics();
  for (const auto& [field, value] : {std::pair{&RankMetrics::busy_ms, 0.23561}, {&RankMetrics::span_ms, 777.772672},
                                     {&RankMetrics::compute_ms, 0.0001}, {&RankMetrics::wait_ms, 0.00001},
                                     {&RankMetrics::transfer_ms, 1e14}, {&RankMetrics::overhead_ms, 123456789012.5}}) {
    t.summary->ranks_detail[0].*field = value;
  }
  const std::string text = TraceToJson(t);
  const std::string want = R"("busy_ms":0.23561,"span_ms":777.772672,"compute_ms":0.0001,"wait_ms":1e-05,)"
                           R"("transfer_ms":100000000000000.0,"overhead_ms":123456789012.5,)";
  EXPECT_NE(text.find(want), std::string::npos) << text.substr(text.find("\"per_rank\""));
}

// The header states the schedule's shape after its microbatches; it reads back.
TEST(TraceTest, HeaderStatesTheShape) {
  Trace t;
  t.source = "predicted";
  t.schedule = "zb-v";
  t.microbatches = 8;
  t.shape = Shape{4, 2, Placement::kV};
  const std::string text = TraceToJson(t);
  EXPECT_EQ(text.substr(text.find("\"stagecraft\"")),
            "\"stagecraft\":{\"source\":\"predicted\",\"scenario\":\"\",\"schedule\":\"zb-v\",\"microbatches\":8,"
            "\"ranks\":4,\"chunks\":2,\"placement\":\"v\",\"summary\":{}}}\n");
  EXPECT_EQ(TraceFromJson(text, "v.json").trace.shape, t.shape);
  t.shape->placement = Placement::kLoop;
  EXPECT_EQ(TraceFromJson(TraceToJson(t), "loop.json").trace.shape, t.shape);
}

TEST(TraceTest, InvalidUtf8IsReplacedSoTheFileStillParses) {
  Trace t;
  t.scenario = "caf\xc3\xa9 \xff";
  const Trace read = TraceFromJson(TraceToJson(t), "utf8.json").trace;
  EXPECT_EQ(read.scenario, "caf\xc3\xa9 \xef\xbf\xbd");
}

TEST(TraceDeathTest, NegativeTimesAndNonFiniteMetricsAreBugs) {
  Trace t = HandMadeTrace();
  t.ops[3].start_ns = -1;
  EXPECT_DEATH(TraceToJson(t), "negative trace time -1 ns");
  t = HandMadeTrace();
  t.counters[0].time_ns = -5;
  EXPECT_DEATH(TraceToJson(t), "negative trace time -5 ns");
  t = HandMadeTrace();
  t.summary->executor->losses[1] = std::nan("");
  EXPECT_DEATH(TraceToJson(t), "non-finite number");
}

}  // namespace
}  // namespace stagecraft::schedules
