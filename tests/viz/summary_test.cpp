// Tests for viz/src/summary.cpp: the summary panel's fields read from a trace's summary object,
// with missing, ill-typed and unparsable parts left at their defaults.
#include "stagecraft/viz/summary.h"

#include <string>

#include <gtest/gtest.h>

namespace stagecraft::viz {
namespace {

LoadedTrace WithSummary(const std::string& summary_json) {
  LoadedTrace t;
  t.trace.summary_json = summary_json;
  return t;
}

TEST(Summary, AllFieldsPresent) {
  // As simulate writes it (sim/src/metrics.cpp), plus the measured losses.
  const Summary s = ReadSummary(WithSummary(
      R"({"schedule":"1f1b","ranks":2,"makespan_ms":200.0,"step_time_ms":100.5,"throughput_samples_per_s":320.25,)"
      R"("bubble_fraction":0.125,"oom":false,"per_rank":[)"
      R"({"rank":0,"busy_ms":80.0,"span_ms":100.0,"peak_memory_bytes":1073741824,"oom":false},)"
      R"({"rank":1,"busy_ms":75.5,"span_ms":100.0,"peak_memory_bytes":2048,"oom":false}],)"
      R"("losses":[2.5,1.25]})"));
  EXPECT_TRUE(s.present);
  EXPECT_DOUBLE_EQ(s.step_time_ms, 100.5);
  EXPECT_DOUBLE_EQ(s.throughput_samples_per_s, 320.25);
  EXPECT_DOUBLE_EQ(s.bubble_fraction, 0.125);
  ASSERT_EQ(s.ranks.size(), 2u);
  EXPECT_DOUBLE_EQ(s.ranks[0].busy_ms, 80.0);
  EXPECT_EQ(s.ranks[0].peak_memory_bytes, 1073741824);
  EXPECT_DOUBLE_EQ(s.ranks[1].busy_ms, 75.5);
  EXPECT_EQ(s.ranks[1].peak_memory_bytes, 2048);
  EXPECT_EQ(s.losses, (std::vector<double>{2.5, 1.25}));
}

TEST(Summary, EmptyObjectIsNotPresent) {
  const Summary s = ReadSummary(WithSummary("{}"));
  EXPECT_FALSE(s.present);
  EXPECT_EQ(s.step_time_ms, 0);
  EXPECT_TRUE(s.ranks.empty());
  EXPECT_TRUE(s.losses.empty());
}

TEST(Summary, UnparsableOrNotAnObjectIsNotPresent) {
  EXPECT_FALSE(ReadSummary(WithSummary("{\"step_time_ms\":")).present);
  EXPECT_FALSE(ReadSummary(WithSummary("[1,2]")).present);
  EXPECT_FALSE(ReadSummary(WithSummary("")).present);
}

TEST(Summary, MissingFieldsKeepDefaults) {
  const Summary s = ReadSummary(WithSummary(R"({"bubble_fraction":0.25,"per_rank":[{"rank":0},{"busy_ms":3}]})"));
  EXPECT_TRUE(s.present);
  EXPECT_EQ(s.step_time_ms, 0);
  EXPECT_EQ(s.throughput_samples_per_s, 0);
  EXPECT_DOUBLE_EQ(s.bubble_fraction, 0.25);
  ASSERT_EQ(s.ranks.size(), 2u);
  EXPECT_EQ(s.ranks[0].busy_ms, 0);
  EXPECT_EQ(s.ranks[0].peak_memory_bytes, 0);
  EXPECT_DOUBLE_EQ(s.ranks[1].busy_ms, 3);
  EXPECT_TRUE(s.losses.empty());
}

TEST(Summary, IllTypedFieldsKeepDefaults) {
  const Summary s = ReadSummary(WithSummary(
      R"({"step_time_ms":"fast","throughput_samples_per_s":null,"bubble_fraction":[0.1],)"
      R"("per_rank":[7,{"busy_ms":"x","peak_memory_bytes":1.5},{"peak_memory_bytes":1e9}],"losses":[1.0,"nan"]})"));
  EXPECT_TRUE(s.present);  // per_rank is there
  EXPECT_EQ(s.step_time_ms, 0);
  EXPECT_EQ(s.throughput_samples_per_s, 0);
  EXPECT_EQ(s.bubble_fraction, 0);
  ASSERT_EQ(s.ranks.size(), 3u);
  EXPECT_EQ(s.ranks[0].busy_ms, 0);
  EXPECT_EQ(s.ranks[1].busy_ms, 0);
  EXPECT_EQ(s.ranks[1].peak_memory_bytes, 0);           // not a whole number of bytes
  EXPECT_EQ(s.ranks[2].peak_memory_bytes, 1'000'000'000);  // a whole number written as a float
  EXPECT_TRUE(s.losses.empty());                          // a list with a string is not used
}

TEST(Summary, PerRankNotAListIsIgnored) {
  const Summary s = ReadSummary(WithSummary(R"({"step_time_ms":5,"per_rank":{"busy_ms":1},"losses":3})"));
  EXPECT_TRUE(s.present);
  EXPECT_DOUBLE_EQ(s.step_time_ms, 5);
  EXPECT_TRUE(s.ranks.empty());
  EXPECT_TRUE(s.losses.empty());
}

TEST(Summary, ReadFromALoadedTrace) {
  const LoadResult r = LoadTraceText(
      R"({"traceEvents":[],"stagecraft":{"schedule":"gpipe","summary":{"step_time_ms":12.5,"losses":[3]}}})", "s.json");
  ASSERT_TRUE(r.trace) << r.error;
  const Summary s = ReadSummary(*r.trace);
  EXPECT_TRUE(s.present);
  EXPECT_DOUBLE_EQ(s.step_time_ms, 12.5);
  EXPECT_EQ(s.losses, (std::vector<double>{3}));
}

}  // namespace
}  // namespace stagecraft::viz
