// Tests for schedules/src/json_out.cpp: the exact text of small values, numbers in shortest
// round-trip form (decimal from 1e-4 to 1e15, null when not finite), strings escaped and
// repaired, a raw value spliced in, and an incomplete value taken as a bug.
#include "stagecraft/schedules/json_out.h"

#include <cmath>
#include <limits>
#include <string>

#include <gtest/gtest.h>

namespace stagecraft::schedules {
namespace {

std::string NumberText(double value) {
  JsonOut out;
  out.StartArray().Number(value).EndArray();
  const std::string text = out.Take();
  return text.substr(1, text.size() - 2);
}

TEST(JsonOutTest, MembersInTheOrderWritten) {
  JsonOut out;
  out.StartObject().Key("b").Int(-3).Key("a").StartArray().Bool(true).Null().String("x").EndArray();
  out.Key("n").Number(0.5).EndObject();
  EXPECT_EQ(out.Take(), R"({"b":-3,"a":[true,null,"x"],"n":0.5})");
}

TEST(JsonOutTest, AnArrayOfStrings) {
  JsonOut out;
  out.StartObject().Key("none").Strings({}).Key("two").Strings({"a", "b\"c"}).EndObject();
  EXPECT_EQ(out.Take(), R"({"none":[],"two":["a","b\"c"]})");
}

TEST(JsonOutTest, NumbersInShortestForm) {
  EXPECT_EQ(NumberText(33), "33.0");
  EXPECT_EQ(NumberText(-90), "-90.0");
  EXPECT_EQ(NumberText(0), "0.0");
  EXPECT_EQ(NumberText(-0.0), "-0.0");
  EXPECT_EQ(NumberText(0.1), "0.1");
  EXPECT_EQ(NumberText(0.1 + 0.2), "0.30000000000000004");  // not 0.3: that is another double
  EXPECT_EQ(NumberText(0.23561), "0.23561");
  EXPECT_EQ(NumberText(0.0001), "0.0001");
  EXPECT_EQ(NumberText(0.00001), "1e-05");
  EXPECT_EQ(NumberText(1.25e-7), "1.25e-07");
  EXPECT_EQ(NumberText(1e14), "100000000000000.0");
  EXPECT_EQ(NumberText(123456789012345.6), "123456789012345.6");
  EXPECT_EQ(NumberText(1e15), "1e+15");
  EXPECT_EQ(NumberText(-2.5e123), "-2.5e+123");
  EXPECT_EQ(NumberText(std::numeric_limits<double>::max()), "1.7976931348623157e+308");
  EXPECT_EQ(NumberText(std::numeric_limits<double>::denorm_min()), "5e-324");
  EXPECT_EQ(NumberText(std::numeric_limits<double>::infinity()), "null");
  EXPECT_EQ(NumberText(std::nan("")), "null");
}

TEST(JsonOutTest, StringsEscapedAndRepaired) {
  JsonOut out;
  out.StartArray().String("a \"q\" \\ \n \x01 \xc3\xa9").String("bad \xff end").EndArray();
  EXPECT_EQ(out.Take(), "[\"a \\\"q\\\" \\\\ \\n \\u0001 \xc3\xa9\",\"bad \xef\xbf\xbd end\"]");
}

TEST(JsonOutTest, RawValuesAreSplicedAndTakeStartsOver) {
  JsonOut inner;
  inner.StartObject().Key("k").Int(1).EndObject();
  const std::string part = inner.Take();
  inner.StartArray().EndArray();
  EXPECT_EQ(inner.Take(), "[]");
  JsonOut out;
  out.StartObject().Key("parts").StartArray().Raw(part).Raw(part).EndArray().EndObject();
  EXPECT_EQ(out.Take(), R"({"parts":[{"k":1},{"k":1}]})");
}

TEST(JsonOutDeathTest, AnIncompleteValueIsABug) {
  EXPECT_DEATH(
      {
        JsonOut out;
        out.StartObject().Key("k");
        out.Take();
      },
      "complete");
}

}  // namespace
}  // namespace stagecraft::schedules
