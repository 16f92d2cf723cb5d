// Tests for schedules/src/metrics_json.cpp and metrics_json_read.cpp: the exact text of a
// predicted and a measured file, round trips, names that need escaping, the strict read's
// one-line errors (file and key path) and the lenient read's defaults.
#include "stagecraft/schedules/metrics_json.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "fuzz_corpus.h"
#include "metrics_cases.h"

namespace stagecraft::schedules {
namespace {

using test_cases::TwoRankMetrics;

MetricsFile Predicted() {
  MetricsFile f;
  f.scenario = "uniform";
  f.source = "predicted";
  f.costs = "explicit";
  f.schedules = {TwoRankMetrics()};
  return f;
}

// The error the strict read gives for `text` (named m.json), or "" when it reads it.
std::string StrictError(const std::string& text) {
  try {
    MetricsFileFromJson(text, "m.json");
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(MetricsJsonTest, ExactTextOfPredictedFile) {
  EXPECT_EQ(MetricsFileToJson(Predicted()),
            R"({"scenario":"uniform","source":"predicted","costs":"explicit","schedules":[)"
            R"({"schedule":"1f1b","ranks":2,"chunks":1,"microbatches":8,"microbatch_size":4,"steps":2,)"
            R"("makespan_ms":66.000000,"step_time_ms":33.000000,"throughput_samples_per_s":969.696970,)"
            R"("bubble_fraction":0.272727273,"oom":true,"per_rank":[)"
            R"({"rank":0,"busy_ms":48.000000,"span_ms":60.500000,"compute_ms":48.000000,"wait_ms":2.500000,)"
            R"("transfer_ms":1.500000,"overhead_ms":0.250000,"idle_ms":13.750000,"peak_memory_bytes":1073741824,)"
            R"("peak_inflight_microbatches":4,"peak_weight_versions":1,"oom":false},)"
            R"({"rank":1,"busy_ms":48.000001,"span_ms":61.000000,"compute_ms":48.000001,"wait_ms":12.000000,)"
            R"("transfer_ms":0.500000,"overhead_ms":0.000001,"idle_ms":5.499998,"peak_memory_bytes":2048,)"
            R"("peak_inflight_microbatches":1,"peak_weight_versions":1,"oom":true}]}]})"
            "\n");
}

// Each stage's weight delays (staleness.h) beside its costs: written, read back, and stated by
// every stage or by none.
TEST(MetricsJsonTest, WeightDelaysTravelWithTheStages) {
  MetricsFile f = Predicted();
  ScheduleMetrics& m = f.schedules[0];
  m.stage_costs.assign(2, StageCostMetrics{1, 2, 1, 1, 0.5});
  m.weight_delays = {StageDelay{0, 1, 1, false}, StageDelay{1, 0, 2, true}};
  const std::string text = MetricsFileToJson(f);
  EXPECT_NE(text.find(R"("step_ms":0.500000,"weight_delay_forward":1,"weight_delay_backward":1,)"
                      R"("weight_versions_differ":false})"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find(R"("weight_delay_forward":0,"weight_delay_backward":2,"weight_versions_differ":true})"),
            std::string::npos);
  EXPECT_EQ(MetricsFileFromJson(text, "m.json").schedules[0], f.schedules[0]);
  // A file from before them reads with none.
  m.weight_delays.clear();
  EXPECT_EQ(MetricsFileFromJson(MetricsFileToJson(f), "m.json").schedules[0].weight_delays.size(), 0u);
  // One stage stating them and the other not is refused, naming the key.
  std::string half = text;
  const std::string second = R"("weight_delay_forward":0,"weight_delay_backward":2,)";
  half.erase(half.find(second), second.size());
  EXPECT_NE(StrictError(half).find("m.json: schedules[0].stages[1].weight_delay_forward: expected weight_delay_forward "
                                   "and weight_delay_backward on every stage or on none"),
            std::string::npos)
      << StrictError(half);
}

TEST(MetricsJsonTest, NumbersAreRoundedToTheirDecimals) {
  MetricsFile f = Predicted();
  f.schedules[0].throughput_samples_per_s = 969.6969696969;
  f.schedules[0].bubble_fraction = 3.0 / 11;
  f.schedules[0].ranks_detail[0].busy_ms = 0.0000004;
  const std::string text = MetricsFileToJson(f);
  EXPECT_NE(text.find(R"("throughput_samples_per_s":969.696970,"bubble_fraction":0.272727273,)"), std::string::npos);
  EXPECT_NE(text.find(R"("busy_ms":0.000000,)"), std::string::npos);
}

TEST(MetricsJsonTest, MeasuredFileAddsBackendAndExecutorFields) {
  MetricsFile f;
  f.scenario = "mlp";
  f.source = "measured";
  f.backend = "cpu";
  f.schedules = {TwoRankMetrics()};
  f.schedules[0].executor = test_cases::MeasuredOnly();
  const std::string text = MetricsFileToJson(f);
  EXPECT_EQ(text.rfind(R"({"scenario":"mlp","source":"measured","backend":"cpu","schedules":[)", 0), 0u) << text;
  EXPECT_NE(text.find(R"("oom":true}],"losses":[0.587640123,2],"step_ms":[41.500000,40.250000],"overhead_ns_per_op":6543.2}]})"
                      "\n"),
            std::string::npos)
      << text;
}

// The precision the run's GEMMs ran in, after the backend, and read back; absent when not stated.
TEST(MetricsJsonTest, MeasuredFileStatesItsPrecision) {
  MetricsFile f;
  f.scenario = "gpt";
  f.source = "measured";
  f.backend = "cuda:0 (NVIDIA H200)";
  f.precision = "tf32";
  f.schedules = {TwoRankMetrics()};
  const std::string text = MetricsFileToJson(f);
  EXPECT_EQ(text.rfind(R"j({"scenario":"gpt","source":"measured","backend":"cuda:0 (NVIDIA H200)","precision":"tf32",)j", 0),
            0u)
      << text;
  const MetricsFile read = MetricsFileFromJson(text, "f.json");
  EXPECT_EQ(read.precision, std::optional<std::string>("tf32"));
  f.precision.reset();
  EXPECT_FALSE(MetricsFileFromJson(MetricsFileToJson(f), "f.json").precision.has_value());
}

TEST(MetricsJsonTest, StrictReadGetsBackWhatWasWritten) {
  MetricsFile f = Predicted();
  f.schedules.push_back(TwoRankMetrics());
  f.schedules[1].schedule = "gpipe";
  f.schedules[1].chunks = 2;
  f.schedules[1].executor = test_cases::MeasuredOnly();
  const MetricsFile read = MetricsFileFromJson(MetricsFileToJson(f), "f.json");
  EXPECT_EQ(read.scenario, f.scenario);
  EXPECT_EQ(read.source, f.source);
  EXPECT_EQ(read.costs, f.costs);
  EXPECT_FALSE(read.backend.has_value());
  EXPECT_EQ(read.schedules, f.schedules);
  EXPECT_EQ(read.Find("gpipe"), &read.schedules[1]);
  EXPECT_EQ(read.Find("zb-h1"), nullptr);
}

// training.target_loss: the step and time it was reached at, or null for both when it was not;
// both read back as written.
TEST(MetricsJsonTest, TimeToTargetIsWrittenAndReadBackNullWhenNotReached) {
  MetricsFile f;
  f.scenario = "mlp";
  f.source = "measured";
  f.schedules = {TwoRankMetrics(), TwoRankMetrics()};
  f.schedules[1].schedule = "pipemare";
  f.schedules[0].executor = test_cases::MeasuredOnly();
  f.schedules[1].executor = test_cases::MeasuredOnly();
  MarkTargetLoss(1.5, 1, &*f.schedules[0].executor);  // losses 0.58764, 2: step 0 reaches it
  MarkTargetLoss(0.1, 2, &*f.schedules[1].executor);  // never
  const std::string text = MetricsFileToJson(f);
  EXPECT_NE(text.find(R"("target_loss":1.5,"loss_window":1,"target_reached_step":0,"time_to_target_ms":41.500000})"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find(R"("target_loss":0.1,"loss_window":2,"target_reached_step":null,"time_to_target_ms":null})"),
            std::string::npos)
      << text;
  const MetricsFile read = MetricsFileFromJson(text, "f.json");
  EXPECT_EQ(read.schedules, f.schedules);
}

// Quotes, backslashes, non-ASCII and control characters are escaped by the writer and come
// back exactly; bytes that are not UTF-8 become U+FFFD so the file still parses.
TEST(MetricsJsonTest, NamesThatNeedEscapingRoundTrip) {
  MetricsFile f = Predicted();
  f.scenario = "odd \"quoted\" back\\slash \xc3\xbc \xe2\x86\x92 tab\there \x01 end";
  f.costs = "profile:C:\\dir\\\xe2\x86\x92.yaml";
  f.schedules[0].schedule = "sch\xc3\xa9" "dule \"x\"";
  const std::string text = MetricsFileToJson(f);
  EXPECT_NE(text.find(R"("scenario":"odd \"quoted\" back\\slash )" "\xc3\xbc \xe2\x86\x92" R"( tab\there \u0001 end")"),
            std::string::npos)
      << text;
  const MetricsFile read = MetricsFileFromJson(text, "odd.json");
  EXPECT_EQ(read.scenario, f.scenario);
  EXPECT_EQ(read.costs, f.costs);
  EXPECT_EQ(read.schedules[0].schedule, f.schedules[0].schedule);

  f.scenario = "caf\xc3\xa9 \xff \xe2\x82";
  EXPECT_EQ(MetricsFileFromJson(MetricsFileToJson(f), "bad.json").scenario, "caf\xc3\xa9 \xef\xbf\xbd \xef\xbf\xbd");
}

TEST(MetricsJsonStrictTest, ErrorsNameTheFileAndKeyPath) {
  const std::string good = MetricsFileToJson(Predicted());
  const auto with = [&good](const std::string& from, const std::string& to) {
    std::string text = good;
    const size_t at = text.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    return text.replace(at, from.size(), to);
  };
  const auto error = StrictError;
  EXPECT_EQ(error(with(R"("step_time_ms":33.000000,)", "")),
            "m.json: schedules[0].step_time_ms: missing (expected a number)");
  EXPECT_EQ(error(with(R"("step_time_ms":33.000000)", R"("step_time_ms":"33")")),
            "m.json: schedules[0].step_time_ms: expected a number (got string)");
  EXPECT_EQ(error(with(R"("ranks":2)", R"("ranks":0)")),
            "m.json: schedules[0].ranks: expected a positive integer (got 0)");
  EXPECT_EQ(error(with(R"("ranks":2)", R"("ranks":1)")),
            "m.json: schedules[0].per_rank: expected 1 entries (ranks), got 2");
  EXPECT_EQ(error(with(R"("busy_ms":48.000000,)", "")),
            "m.json: schedules[0].per_rank[0].busy_ms: missing (expected a number)");
  EXPECT_EQ(error(with(R"({"rank":1,)", R"(7,{"rank":1,)")),
            "m.json: schedules[0].per_rank: expected 2 entries (ranks), got 3");
  EXPECT_EQ(error(with(R"("peak_memory_bytes":2048)", R"("peak_memory_bytes":1.5)")),
            "m.json: schedules[0].per_rank[1].peak_memory_bytes: expected a whole number of bytes (got 1.5)");
  EXPECT_EQ(error(with(R"("oom":true,"per_rank")", R"("oom":1,"per_rank")")),
            "m.json: schedules[0].oom: expected a boolean (got number)");
  EXPECT_EQ(error(with(R"("steps":2,)", R"("steps":2,"losses":[1,"x"],)")),
            "m.json: schedules[0].losses[1]: expected a number (got string)");
  EXPECT_EQ(error(with(R"("schedule":"1f1b")", R"("schedule":"")")),
            "m.json: schedules[0].schedule: expected a non-empty name without control characters");
  EXPECT_EQ(error(with(R"("costs":"explicit")", R"("costs":3)")), "m.json: costs: expected a string (got number)");
  EXPECT_EQ(error(with(R"("schedules":[{)", R"("schedules":[[]]}{)")).rfind("m.json: not valid JSON (byte ", 0), 0u);
  EXPECT_EQ(error(R"({"schedules":[3]})"), "m.json: schedules[0]: expected an object (got number)");
  EXPECT_EQ(error(with(R"("ranks":2)", R"("ranks":3)").replace(good.find(R"("per_rank":[)") + 12, 0, "7,")),
            "m.json: schedules[0].per_rank[0]: expected an object (got number)");
  EXPECT_EQ(error(R"({"scenario":"x"})"), "m.json: schedules: missing (expected an array)");
  EXPECT_EQ(error("[]"), "m.json: expected an object (got array)");
  // 40 bytes end in the string "predicted"; the byte counts from 1, the column too.
  EXPECT_EQ(error(good.substr(0, 40)),
            "m.json: not valid JSON (byte 41): unexpected end of input in a string at line 1, column 41");
  EXPECT_EQ(error(with(R"("step_time_ms":33.000000)", R"("step_time_ms":1e400)")),
            "m.json: not valid JSON: number overflow parsing '1e400'");
  EXPECT_EQ(error(with(R"("step_time_ms":33.000000)", R"("step_time_ms":1.8e308)")),
            "m.json: not valid JSON: number overflow parsing '1.8e308'");
  MetricsFile twice = Predicted();
  twice.schedules.push_back(TwoRankMetrics());
  EXPECT_EQ(error(MetricsFileToJson(twice)), "m.json: schedules[1]: schedule '1f1b' appears twice");
}

// Times, rates and fractions are never negative, and a fraction is at most 1; each case's file
// is in the fuzz corpus.
TEST(MetricsJsonStrictTest, NegativeAndNonNumericValuesAreNamed) {
  const std::pair<const char*, const char*> cases[] = {
      {"negative-step-time.json", "schedules[0].step_time_ms: expected a non-negative number (got -5)"},
      {"negative-busy.json", "schedules[0].per_rank[1].busy_ms: expected a non-negative number (got -1.5)"},
      {"step-time-not-a-number.json", "schedules[0].step_time_ms: expected a number (got string)"},
      {"partial-negative-step-ms.json", "partial.step_ms[0]: expected a non-negative number (got -3)"},
      {"bubble-above-one.json", "schedules[0].bubble_fraction: expected a fraction from 0 to 1 (got 1.5)"},
  };
  for (const auto& [name, why] : cases) {
    EXPECT_EQ(StrictError(test_cases::FuzzCorpusText("metrics", name)), std::string("m.json: ") + why) << name;
  }
  // The lenient read keeps the default instead.
  const std::optional<ScheduleMetrics> lenient = ScheduleMetricsFromJsonLenient(R"({"step_time_ms":-5,"ranks":2})");
  ASSERT_TRUE(lenient);
  EXPECT_EQ(lenient->step_time_ms, ScheduleMetrics{}.step_time_ms);
  EXPECT_EQ(lenient->ranks, 2);
  EXPECT_EQ(ScheduleMetricsFromJsonLenient(R"({"bubble_fraction":1.5,"ranks":2})")->bubble_fraction, 0);
  // A whole step idle is still a fraction.
  std::string whole = test_cases::FuzzCorpusText("metrics", "bubble-above-one.json");
  whole.replace(whole.find("1.5"), 3, "1.0");
  EXPECT_EQ(MetricsFileFromJson(whole, "m.json").schedules[0].bubble_fraction, 1.0);
}

// Numbers are read exactly (found by the metrics and schedule fuzz harnesses: RapidJSON 1.1.0
// read "0e308" as 1.9e289): a zero with any exponent is 0, below the smallest denormal is a
// signed 0, past DBL_MAX an overflow, and an integer past 64 bits a double.
TEST(MetricsJsonStrictTest, NumbersAreReadExactly) {
  const std::string text = MetricsFileToJson(Predicted());
  const std::string key = R"("step_time_ms":)";
  const size_t at = text.find(key);
  ASSERT_NE(at, std::string::npos);
  const size_t end = text.find_first_of(",}", at);
  const auto with = [&](const std::string& number) { return text.substr(0, at) + key + number + text.substr(end); };
  const auto step_time = [&](const std::string& number) {
    return MetricsFileFromJson(with(number), "m.json").schedules.at(0).step_time_ms;
  };
  EXPECT_EQ(step_time("0e308"), 0.0);
  EXPECT_EQ(step_time("0.000e300"), 0.0);
  EXPECT_EQ(step_time("1e-400"), 0.0);
  EXPECT_EQ(step_time("0.001e-330"), 0.0);
  EXPECT_EQ(step_time("0.0007e-9223372036854775807"), 0.0);  // the exponent's place cannot overflow
  EXPECT_EQ(step_time("0.001e-320"), 9.8813129168249309e-324);  // 1e-323, rounded to a denormal
  EXPECT_EQ(step_time("4.9406564584124654e-324"), 4.9406564584124654e-324);  // the smallest denormal
  EXPECT_EQ(step_time("1.7976931348623157e308"), 1.7976931348623157e308);
  EXPECT_EQ(step_time("2.5e1"), 25.0);
  EXPECT_EQ(step_time("123456789012345678901234"), 1.2345678901234568e23);
  EXPECT_EQ(StrictError(with("1000e306")), "m.json: not valid JSON: number overflow parsing '1000e306'");
}

TEST(MetricsJsonStrictTest, UnknownKeysAndAbsentOptionalOnesAreFine) {
  const MetricsFile read = MetricsFileFromJson(
      R"({"extra":[1],"schedules":[{"schedule":"gpipe","ranks":1,"microbatches":2,"microbatch_size":3,"steps":4,)"
      R"("step_time_ms":5,"throughput_samples_per_s":6,"bubble_fraction":0,"per_rank":[{"busy_ms":7,"x":{}}]}]})",
      "min.json");
  ASSERT_EQ(read.schedules.size(), 1u);
  const ScheduleMetrics& s = read.schedules[0];
  EXPECT_EQ(read.scenario, "");
  EXPECT_EQ(s.chunks, 1);
  EXPECT_EQ(s.step_time_ms, 5);
  ASSERT_EQ(s.ranks_detail.size(), 1u);
  EXPECT_EQ(s.ranks_detail[0].rank, 0);
  EXPECT_EQ(s.ranks_detail[0].busy_ms, 7);
  EXPECT_FALSE(s.executor.has_value());
}

// With replicas the file states them and each rank's collective part, between transfer_ms and
// overhead_ms; both read back. Without (every file above), neither key is written, and a file
// without them reads as one replica with no collective time.
TEST(MetricsJsonTest, ReplicasAddDataParallelAndCollectiveMs) {
  MetricsFile f = Predicted();
  ScheduleMetrics& m = f.schedules[0];
  m.data_parallel = 2;
  m.ranks_detail[0].overhead_ms = 0.125;
  m.ranks_detail[0].collective_ms = 0.125;  // from the overhead: the parts still sum to 66 ms
  m.ranks_detail[1].collective_ms = 0;
  const std::string text = MetricsFileToJson(f);
  EXPECT_NE(text.find(R"("microbatch_size":4,"steps":2,"data_parallel":2,"makespan_ms":66.000000,)"), std::string::npos)
      << text;
  EXPECT_NE(text.find(R"("transfer_ms":1.500000,"collective_ms":0.125000,"overhead_ms":0.125000,"idle_ms":13.750000,)"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find(R"("transfer_ms":0.500000,"collective_ms":0.000000,"overhead_ms":0.000001,)"), std::string::npos)
      << text;
  EXPECT_EQ(MetricsFileFromJson(text, "dp.json").schedules, f.schedules);

  const MetricsFile one = MetricsFileFromJson(MetricsFileToJson(Predicted()), "one.json");
  EXPECT_EQ(MetricsFileToJson(Predicted()).find("collective"), std::string::npos);
  EXPECT_EQ(one.schedules[0].data_parallel, 1);
  EXPECT_EQ(one.schedules[0].ranks_detail[0].collective_ms, 0);
  // A collective time is a time: negative is refused like the other parts.
  std::string bad = text;
  bad.replace(bad.find(R"("collective_ms":0.125000)"), 24, R"("collective_ms":-1.00000)");
  EXPECT_EQ(StrictError(bad), "m.json: schedules[0].per_rank[0].collective_ms: expected a non-negative number (got -1.0)");
}

// The lenient read (the viewer's summary panel): what is usable is read, the rest defaults.
TEST(MetricsJsonLenientTest, AllFieldsPresent) {
  const auto s = ScheduleMetricsFromJsonLenient(
      R"({"schedule":"1f1b","ranks":2,"makespan_ms":200.0,"step_time_ms":100.5,"throughput_samples_per_s":320.25,)"
      R"("bubble_fraction":0.125,"oom":false,"per_rank":[)"
      R"({"rank":0,"busy_ms":80.0,"span_ms":100.0,"peak_memory_bytes":1073741824,"oom":false},)"
      R"({"rank":1,"busy_ms":75.5,"span_ms":100.0,"peak_memory_bytes":2048,"oom":false}],)"
      R"("losses":[2.5,1.25]})");
  ScheduleMetrics want{.schedule = "1f1b", .ranks = 2, .makespan_ns = 200'000'000, .makespan_ms = 200,
                       .step_time_ms = 100.5, .throughput_samples_per_s = 320.25, .bubble_fraction = 0.125,
                       .ranks_detail = {{0, 80, 100, 1073741824}, {1, 75.5, 100, 2048}}, .executor = {},
                       .stage_costs = {}, .weight_delays = {}};
  want.executor.emplace().losses = {2.5, 1.25};
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(*s, want);
}

TEST(MetricsJsonLenientTest, NothingUsableIsNoSummary) {
  EXPECT_FALSE(ScheduleMetricsFromJsonLenient("{}").has_value());
  EXPECT_FALSE(ScheduleMetricsFromJsonLenient(R"({"z":1,"a":[2.5,"x"]})").has_value());
  EXPECT_FALSE(ScheduleMetricsFromJsonLenient("{\"step_time_ms\":").has_value());
  EXPECT_FALSE(ScheduleMetricsFromJsonLenient("[1,2]").has_value());
  EXPECT_FALSE(ScheduleMetricsFromJsonLenient("").has_value());
}

TEST(MetricsJsonLenientTest, MissingFieldsKeepDefaults) {
  const auto s = ScheduleMetricsFromJsonLenient(R"({"bubble_fraction":0.25,"per_rank":[{"rank":0},{"busy_ms":3}]})");
  ScheduleMetrics want;
  want.bubble_fraction = 0.25;
  want.ranks_detail = {{0}, {1, 3}};  // a rank entry without "rank" is numbered by its position
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(*s, want);
}

TEST(MetricsJsonLenientTest, IllTypedFieldsKeepDefaults) {
  const auto s = ScheduleMetricsFromJsonLenient(
      R"({"step_time_ms":"fast","throughput_samples_per_s":null,"bubble_fraction":[0.1],"ranks":-1,)"
      R"("per_rank":[7,{"busy_ms":"x","peak_memory_bytes":1.5},{"peak_memory_bytes":1e9}],"losses":[1.0,"nan"]})");
  // 1.5 is not a whole number of bytes, 1e9 is; a list of losses with a string is not used.
  ScheduleMetrics want;
  want.ranks_detail = {{0}, {1}, {2, 0, 0, 1'000'000'000}};
  ASSERT_TRUE(s.has_value());  // per_rank is there
  EXPECT_EQ(*s, want);
}

TEST(MetricsJsonLenientTest, PerRankNotAListIsIgnored) {
  const auto s = ScheduleMetricsFromJsonLenient(R"({"step_time_ms":5,"per_rank":{"busy_ms":1},"losses":3})");
  ASSERT_TRUE(s.has_value());
  EXPECT_DOUBLE_EQ(s->step_time_ms, 5);
  EXPECT_TRUE(s->ranks_detail.empty());
  EXPECT_FALSE(s->executor.has_value());
}

}  // namespace
}  // namespace stagecraft::schedules

namespace stagecraft::schedules {
namespace {

// A partial run's file (execute's OUT.partial): its "partial" object is written after the
// schedules and read back; counts that disagree with the file are refused by name.
TEST(MetricsJsonTest, PartialRunRoundTripsAndItsCountsAreChecked) {
  MetricsFile f;
  f.scenario = "s";
  f.source = "measured";
  f.schedules = {test_cases::TwoRankMetrics()};
  f.partial = PartialRun{1, 3, "gpipe", 20, {0.5, 0.25}, {1.5, 2.0}};
  const std::string text = MetricsFileToJson(f);
  EXPECT_NE(text.find(R"(],"partial":{"schedules_done":1,"schedules_total":3,"schedule":"gpipe","steps":20,)"
                      R"("steps_done":2,"losses":[0.5,0.25],"step_ms":[1.500000,2.000000]}})"),
            std::string::npos)
      << text;
  const MetricsFile back = MetricsFileFromJson(text, "m.json.partial");
  ASSERT_TRUE(back.partial.has_value());
  EXPECT_EQ(back.partial->schedules_done, 1);
  EXPECT_EQ(back.partial->schedules_total, 3);
  EXPECT_EQ(back.partial->schedule, "gpipe");
  EXPECT_EQ(back.partial->steps, 20);
  EXPECT_EQ(back.partial->losses, (std::vector<double>{0.5, 0.25}));
  EXPECT_EQ(back.partial->step_ms, (std::vector<double>{1.5, 2.0}));
  EXPECT_FALSE(MetricsFileFromJson(MetricsFileToJson(MetricsFile{}), "m.json").partial.has_value());

  auto error = [&](PartialRun p) {
    MetricsFile g = f;
    g.partial = std::move(p);
    try {
      MetricsFileFromJson(MetricsFileToJson(g), "m.json");
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_EQ(error({2, 3, "gpipe", 20, {}, {}}), "m.json: partial.schedules_done: 2 but the file holds 1 schedule(s)");
  EXPECT_EQ(error({1, 3, "gpipe", 1, {1, 2}, {1, 2}}), "m.json: partial.step_ms: 2 step time(s) and 2 loss(es) for 1 step(s)");
  EXPECT_EQ(error({1, 3, "gpipe", 20, {1}, {1, 2}}), "m.json: partial.step_ms: 2 step time(s) and 1 loss(es) for 20 step(s)");
}

}  // namespace
}  // namespace stagecraft::schedules
