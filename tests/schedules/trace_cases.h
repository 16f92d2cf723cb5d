// Test helpers for the trace writer and reader tests: ops built in one call, a hand-made trace
// with every stream and kind, the field-by-field comparison of two traces, and the message an
// InputError carries.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <tuple>

#include <gtest/gtest.h>

#include "metrics_cases.h"
#include "stagecraft/base/error.h"
#include "stagecraft/schedules/trace.h"

namespace stagecraft::schedules::test_cases {

// `m` as the summary of a trace of `source` ("predicted" | "measured"), written and read back
// (what the viewer reads a trace's summary from).
inline std::optional<ScheduleMetrics> SummaryThroughATrace(const ScheduleMetrics& m, const std::string& source) {
  Trace trace;
  trace.source = source;
  trace.schedule = m.schedule;
  trace.summary = m;
  return TraceFromJson(TraceToJson(trace), "t.json").trace.summary;
}

inline TraceOp MakeOp(int rank, Stream stream, Op op, int op_index, int64_t start_ns, int64_t duration_ns) {
  return TraceOp{.rank = rank, .stream = stream, .op = op, .op_index = op_index, .start_ns = start_ns,
                 .duration_ns = duration_ns};
}

// Three ranks, all streams, every kind, and times that are not whole microseconds.
inline Trace HandMadeTrace() {
  Trace t;
  t.source = "predicted";
  t.scenario = "hand made";
  t.schedule = "zb-h1";
  t.microbatches = 3;
  t.summary = TwoRankMetrics();
  t.summary->executor = MeasuredOnly();
  t.ops = {
      MakeOp(0, Stream::kCompute, Op{OpKind::kF, 0, 2, 1, 1, -1}, 0, 1, 999),
      MakeOp(0, Stream::kSend, Op{OpKind::kSendF, 0, 2, 1, 0, 1}, 1, 1000, 1),
      MakeOp(1, Stream::kRecv, Op{OpKind::kRecvF, 1, 2, 1, 0, 0}, 0, 1000001, 0),
      MakeOp(1, Stream::kCompute, Op{OpKind::kB, 1, 0, 0, 0, -1}, 1, 1000002, 123456789),
      MakeOp(1, Stream::kSend, Op{OpKind::kSendB, 1, 0, 0, 0, 0}, 2, 999999999999, 7),
      MakeOp(0, Stream::kRecv, Op{OpKind::kRecvB, 0, 0, 0, 0, 1}, 2, 5, 3),
      MakeOp(0, Stream::kCompute, Op{OpKind::kI, 0, 1, 0, 0, -1}, 3, 0, 0),
      MakeOp(0, Stream::kCompute, Op{OpKind::kW, 0, 1, 0, 0, -1}, 4, 10, 11),
      MakeOp(12, Stream::kCompute, Op{OpKind::kStep, 12, 0, 0, 3, -1}, 9, 2000000000001, 1001),
  };
  t.counters = {{0, 0, 0}, {1, 1000001, 1LL << 40}, {12, 17, 999}};
  t.shape = Shape{13, 1, Placement::kLoop};  // stage s on rank s, up to 12
  return t;
}

inline void ExpectSameTrace(const Trace& got, const Trace& want) {
  EXPECT_EQ(std::tie(got.source, got.scenario, got.schedule), std::tie(want.source, want.scenario, want.schedule));
  EXPECT_EQ(got.microbatches, want.microbatches);
  EXPECT_EQ(got.shape, want.shape);
  EXPECT_EQ(got.summary, want.summary);
  ASSERT_EQ(got.ops.size(), want.ops.size());
  // Messages after << are built only on failure, which keeps the 200k-op case quick.
  for (size_t i = 0; i < want.ops.size(); ++i) {
    EXPECT_EQ(got.ops[i].rank, want.ops[i].rank) << "op " << i;
    EXPECT_EQ(got.ops[i].stream, want.ops[i].stream) << "op " << i;
    EXPECT_EQ(got.ops[i].op, want.ops[i].op) << "op " << i;
    EXPECT_EQ(got.ops[i].op_index, want.ops[i].op_index) << "op " << i;
    EXPECT_EQ(got.ops[i].start_ns, want.ops[i].start_ns) << "op " << i;
    EXPECT_EQ(got.ops[i].duration_ns, want.ops[i].duration_ns) << "op " << i;
  }
  ASSERT_EQ(got.counters.size(), want.counters.size());
  for (size_t i = 0; i < want.counters.size(); ++i) {
    EXPECT_EQ(got.counters[i].rank, want.counters[i].rank) << "counter " << i;
    EXPECT_EQ(got.counters[i].time_ns, want.counters[i].time_ns) << "counter " << i;
    EXPECT_EQ(got.counters[i].memory_bytes, want.counters[i].memory_bytes) << "counter " << i;
  }
}

// The InputError message `fn` throws, or "" (and a failure) when it throws none.
inline std::string ErrorOf(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const InputError& e) {
    return e.what();
  }
  ADD_FAILURE() << "no InputError thrown";
  return "";
}

// A trace holding the one event `event` (JSON text).
inline std::string OneEventTrace(const std::string& event) {
  return R"({"traceEvents":[)" + event + "]}";
}

}  // namespace stagecraft::schedules::test_cases
