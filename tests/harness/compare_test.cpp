// harness/compare.cpp's CompareRuns on tests/data/compare's hand-written files (1f1b predicted
// 110 ms against 100 measured: +10%; gpipe 95 against 100: -5%; zb-h1 only predicted,
// interleaved only measured), the limit, a partial run's warning, and refusals.
#include "stagecraft/harness/compare.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "stagecraft/base/error.h"
#include "stagecraft/base/input_file.h"

namespace stagecraft::harness {
namespace {

const std::string kData = std::string(STAGECRAFT_TEST_DATA) + "/compare/";

TEST(CompareRuns, HandWrittenErrorsAndTheLimit) {
  const RunFile predicted = ReadRunFile(kData + "predicted.json");
  const RunFile measured = ReadRunFile(kData + "measured.json");
  CompareOptions options;
  options.max_error_pct = 5;
  std::vector<std::string> warnings;
  options.warn = [&](const std::string& line) { warnings.push_back(line); };
  const Comparison c = CompareRuns(predicted, measured, options);
  EXPECT_EQ(c.worst, "1f1b");
  EXPECT_DOUBLE_EQ(c.worst_error_pct, 10.0);
  EXPECT_EQ(c.exceeded, std::vector<std::string>{"1f1b"});  // gpipe's -5% is within 5
  EXPECT_TRUE(warnings.empty());
  EXPECT_NE(c.text.find("only in predicted: zb-h1\n"), std::string::npos) << c.text;
  EXPECT_NE(c.text.find("only in measured: interleaved\n"), std::string::npos) << c.text;
  EXPECT_NE(c.text.find("step-time error above 5.0%: 1f1b (+10.0%)\n"), std::string::npos) << c.text;
  EXPECT_NE(c.json.find("\"exceeded\":[\"1f1b\"]"), std::string::npos) << c.json;
  EXPECT_EQ(c.json.back(), '\n');
  options.max_error_pct = -1;  // no limit: nothing exceeded, and no limit in the JSON
  const Comparison unlimited = CompareRuns(predicted, measured, options);
  EXPECT_TRUE(unlimited.exceeded.empty());
  EXPECT_EQ(unlimited.json.find("max_error_pct"), std::string::npos);
}

TEST(CompareRuns, APartialRunIsToldOnceAndItsFinishedStepsCompared) {
  const RunFile predicted = ReadRunFile(kData + "predicted.json");
  std::string text = ReadInputFile(kData + "measured.json", kMaxJsonBytes, "a metrics file");
  text = text.substr(0, text.find_last_of('}')) +
         ",\"partial\":{\"schedules_done\":3,\"schedules_total\":4,\"schedule\":\"zb-h1\",\"steps\":4,"
         "\"steps_done\":2,\"losses\":[2.0,1.5],\"step_ms\":[150.0,110.0]}}\n";
  const RunFile measured = RunFileFromJson(text, "m.json.partial");
  std::vector<std::string> warnings;
  CompareOptions options;
  options.warn = [&](const std::string& line) { warnings.push_back(line); };
  const Comparison c = CompareRuns(predicted, measured, options);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_EQ(warnings[0], "warning: m.json.partial is a partial run, not a complete one: 3 of 4 schedule(s) "
                         "finished, then zb-h1 stopped after 2 of 4 step(s); only what finished is compared");
  // zb-h1's finished steps after the first: 110 ms against 100 predicted, -9.1%; 1f1b's +10% is larger.
  EXPECT_NE(c.text.find("zb-h1*"), std::string::npos) << c.text;
  EXPECT_EQ(c.worst, "1f1b");
}

TEST(CompareRuns, Refusals) {
  const RunFile predicted = ReadRunFile(kData + "predicted.json");
  RunFile only_other = ReadRunFile(kData + "measured.json");
  only_other.schedules.erase(only_other.schedules.begin() + 1);  // interleaved stays: gpipe and 1f1b go
  only_other.schedules.erase(only_other.schedules.begin() + 1);
  only_other.schedules.erase(only_other.schedules.begin());
  EXPECT_THROW(CompareRuns(predicted, only_other, {}), InputError);
  RunFile zero = predicted;
  zero.schedules[0].step_time_ms = 0;
  EXPECT_THROW(CheckStepTimes(zero), InputError);
  RunFile partial = predicted;
  partial.partial.emplace();
  EXPECT_THROW(CompareRuns(partial, ReadRunFile(kData + "measured.json"), {}), InputError);
  // One file as both sides, by another name too; a run first and a prediction second.
  EXPECT_THROW(CompareRuns(predicted, predicted, {}), InputError);
  RunFile again = predicted;
  again.path = kData + "../compare/predicted.json";
  EXPECT_THROW(CompareRuns(predicted, again, {}), InputError);
  const RunFile measured = ReadRunFile(kData + "measured.json");
  EXPECT_THROW(CompareRuns(measured, predicted, {}), InputError);
  // A measured step time of 0 has no relative error.
  RunFile zero_run = measured;
  zero_run.schedules[0].step_time_ms = 0;
  EXPECT_THROW(CompareRuns(predicted, zero_run, {}), InputError);
}

// A prediction of 0 ms (a zero-cost scenario) compares: its step is -100% off, and its
// throughput, not defined, has no error.
TEST(CompareRuns, AZeroTimePredictionCompares) {
  RunFile predicted = ReadRunFile(kData + "predicted.json");
  for (auto& s : predicted.schedules) s.step_time_ms = 0, s.throughput_samples_per_s = 0;
  const Comparison c = CompareRuns(predicted, ReadRunFile(kData + "measured.json"), {});
  EXPECT_EQ(c.worst_error_pct, -100.0);
  EXPECT_NE(c.text.find("  throughput (samples/s)              -        320.0       n/a\n"), std::string::npos) << c.text;
}

}  // namespace
}  // namespace stagecraft::harness
