// Tests for schedules/src/json_io.cpp: the exact text of a small schedule, round trips of
// every generator (lowered and not), and errors that name the JSON path of the bad field.
#include "stagecraft/schedules/json_io.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "generator_cases.h"
#include "stagecraft/base/error.h"
#include "stagecraft/schedules/generators.h"
#include "stagecraft/schedules/lower.h"

namespace stagecraft::schedules {
namespace {

// The small generator cases, with the flags the JSON carries but CSV does not switched on
// where the generator allows them.
std::vector<Schedule> AllGenerated() {
  std::vector<Schedule> out;
  for (test_cases::GeneratorCase c : test_cases::SmallGeneratorCases()) {
    c.params.recompute = c.params.steps == 2;
    c.params.vertical_sync = c.info->weights == WeightPolicy::kStash && c.params.microbatches == 4;
    out.push_back(Generate(c.info->name, c.params));
  }
  return out;
}

using test_cases::Params;

// Asserts FromJson throws an InputError whose message is exactly `want`.
void ExpectError(const std::string& text, const std::string& want) {
  try {
    FromJson(text, "x.json");
    ADD_FAILURE() << "no error, expected: " << want;
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()), want);
  }
}

// Replaces the first occurrence of `from` in `text`, which must be there.
std::string Replace(std::string text, const std::string& from, const std::string& to) {
  const size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) text.replace(at, from.size(), to);
  return text;
}

// GPipe on one rank with one microbatch: F, B, then the STEP producing version 1.
TEST(JsonIoTest, WritesHeaderThenOneOpPerLine) {
  EXPECT_EQ(ToJson(Generate("gpipe", Params(1, 1))),
            "{\n"
            " \"schedule\":\"gpipe\",\n"
            " \"ranks\":1,\n"
            " \"chunks\":1,\n"
            " \"placement\":\"loop\",\n"
            " \"microbatches\":1,\n"
            " \"steps\":1,\n"
            " \"weights\":\"flush\",\n"
            " \"recompute\":false,\n"
            " \"vertical_sync\":false,\n"
            " \"lowered\":false,\n"
            " \"ops\":[\n"
            "  [\n"
            "   {\"kind\":\"F\",\"stage\":0,\"microbatch\":0,\"step\":0,\"version\":0,\"peer\":-1},\n"
            "   {\"kind\":\"B\",\"stage\":0,\"microbatch\":0,\"step\":0,\"version\":0,\"peer\":-1},\n"
            "   {\"kind\":\"STEP\",\"stage\":0,\"microbatch\":0,\"step\":0,\"version\":1,\"peer\":-1}\n"
            "  ]\n"
            " ]\n"
            "}\n");
}

TEST(JsonIoTest, RoundTripsEveryGeneratorLoweredAndNot) {
  for (const Schedule& s : AllGenerated()) {
    EXPECT_EQ(FromJson(ToJson(s), "gen.json"), s) << s.name << " ranks=" << s.ranks() << "\n" << ToJson(s);
    const Schedule lowered = Lower(s);
    EXPECT_EQ(FromJson(ToJson(lowered), "gen.json"), lowered) << s.name << " lowered, ranks=" << s.ranks();
  }
}

TEST(JsonIoTest, RoundTripsOddShapes) {
  Schedule s;
  s.name = "a \"quoted\" name";
  s.shape = Shape{3, 2, Placement::kV};
  s.weights = WeightPolicy::kTwoBW;
  s.ops = {{}, {Op{OpKind::kSendB, 4, 0, 0, 0, 2}}, {}};
  EXPECT_EQ(FromJson(ToJson(s), "odd.json"), s);
  s.ops.clear();
  s.shape.ranks = 1;
  s.ops.resize(1);
  EXPECT_EQ(FromJson(ToJson(s), "odd.json"), s);
}

// Text that is not JSON is located the way the trace reader locates it (line and column from 1,
// byte from 0); a number beyond a double is named. The header's lines are " \"schedule\":
// \"1f1b\",", " \"ranks\":2," and so on, and the ops of 1F1B on 2 ranks take lines 12 to 28.
TEST(JsonIoTest, SyntaxErrorsAreLocated) {
  const std::string text = ToJson(Generate("1f1b", Params(2, 2)));
  ExpectError(text.substr(0, 19), "x.json: not valid JSON: unexpected end of input in a string at line 2, column 18 "
                                  "(byte 19)");
  ExpectError(text.substr(0, text.find("\"ops\"")), "x.json: not valid JSON: unexpected end of input at line 12, "
                                                     "column 2 (byte 182)");
  ExpectError(Replace(text, "\"ranks\":2,", "\"ranks\":2,,"),
              "x.json: not valid JSON: expected a string key at line 3, column 12 (byte 33)");
  ExpectError(Replace(text, "\"ranks\":2,", std::string("\"ranks\":2\0,", 11)),
              "x.json: not valid JSON: expected ',' or '}' after an object member at line 3, column 11 (byte 32)");
  const std::string after = "x.json: not valid JSON: unexpected text after the JSON value at line 29, column 1 (byte " +
                            std::to_string(text.size()) + ")";
  ExpectError(text + "x", after);
  ExpectError(text + '\0', after);
  // An unpaired low surrogate is found once its string is read: the position after it.
  ExpectError(Replace(text, "\"1f1b\"", "\"1f\\udc00\""),
              "x.json: not valid JSON: unpaired UTF-16 surrogate in a string at line 2, column 23 (byte 24)");
  ExpectError(Replace(text, "\"stage\":0", "\"stage\":1e400"), "x.json: not valid JSON: number overflow parsing '1e400'");
  ExpectError(Replace(text, "\"stage\":0", "\"stage\":-1.8e308"),
              "x.json: not valid JSON: number overflow parsing '-1.8e308'");
  // A UTF-8 byte order mark may open the file.
  EXPECT_EQ(FromJson("\xEF\xBB\xBF" + text, "bom.json"), Generate("1f1b", Params(2, 2)));
}

// Of a key given twice the last one counts, as in the trace reader.
TEST(JsonIoTest, TheLastOfARepeatedKeyCounts) {
  const std::string text = ToJson(Generate("1f1b", Params(2, 2)));
  EXPECT_EQ(FromJson(Replace(text, "\"schedule\":", "\"schedule\":\"x\",\"schedule\":"), "dup.json").name, "1f1b");
  EXPECT_EQ(FromJson(Replace(text, "\"1f1b\",", "\"1f1b\",\"schedule\":\"x\","), "dup.json").name, "x");
}

// A shape far larger than the ops (chunks: 2147483647) overflowed
// Shape::stages() and sized Validate's tables.
TEST(JsonIoTest, ShapeFarBeyondTheOpsIsAnError) {
  const std::string good = ToJson(Generate("1f1b", Params(2, 2)));
  ExpectError(Replace(good, "\"chunks\":1", "\"chunks\":2147483647"),
              "x.json: schedule too large (4294967294 stages x 2 microbatches x 1 steps)");
  ExpectError(Replace(good, "\"microbatches\":2", "\"microbatches\":100000000"),
              "x.json: 2 stages x 100000000 microbatches x 1 steps need 200000000 forward actions, one each, but "
              "there are 4");
}

TEST(JsonIoTest, BadFieldsNameTheirPath) {
  // 1F1B, p = 2, m = 2: ops[1] is 1F0, 1B0, 1F1, 1B1, STEP, so 1F1 is ops[1][2].
  const std::string good = ToJson(Generate("1f1b", Params(2, 2)));
  struct Case {
    std::string from, to, error;  // `good` with `from` replaced by `to` fails with `error`
  };
  const Case cases[] = {
      {"\"ops\"", "\"opz\"", "x.json: ops: missing field"},
      {"{\"kind\":\"F\",\"stage\":1,\"microbatch\":1", "{\"kind\":\"Q\",\"stage\":1,\"microbatch\":1",
       "x.json: ops[1][2].kind: unknown kind 'Q'"},
      {"\"ranks\":2", "\"ranks\":\"2\"", "x.json: ranks: expected an integer, got string"},
      {"\"ranks\":2", "\"ranks\":0", "x.json: ranks: must be >= 1 (got 0)"},
      {"\"ranks\":2", "\"ranks\":3", "x.json: ops: expected one list per rank (3), got 2"},
      {"\"loop\"", "\"zigzag\"", "x.json: placement: unknown placement 'zigzag' (expected loop or v)"},
      {"\"flush\"", "\"lazy\"", "x.json: weights: unknown weights policy 'lazy' (expected flush, stash, 2bw or nostash)"},
      {"\"lowered\":false", "\"lowered\":0", "x.json: lowered: expected true or false, got number"},
      {",\"peer\":-1}", "}", "x.json: ops[0][0].peer: missing field"},
      {"\"step\":0", "\"step\":1.5", "x.json: ops[0][0].step: expected an integer, got number"},
      {"\"stage\":0", "\"stage\":4294967296", "x.json: ops[0][0].stage: 4294967296 does not fit a 32-bit integer"},
      {"{\"kind\":\"F\",\"stage\":0,\"microbatch\":0,\"step\":0,\"version\":0,\"peer\":-1}", "7",
       "x.json: ops[0][0]: expected an op object, got number"},
  };
  for (const Case& c : cases) ExpectError(Replace(good, c.from, c.to), c.error);
  ExpectError("[1, 2]", "x.json: (root): expected an object, got array");
}

}  // namespace
}  // namespace stagecraft::schedules
