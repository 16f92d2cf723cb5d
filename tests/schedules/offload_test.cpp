// Placing activation copies (schedules/offload.h) and what they do to the activations a rank
// holds on its device (lifetimes.h ResidentBefore, analysis.h PeakHeld), worked by hand on the
// first rank of 1F1B over 4 ranks and 8 microbatches, whose compute list is
//   F0 F1 F2 F3 B0 F4 B1 F5 B2 F6 B3 F7 B4 B5 B6 B7 STEP1   (positions 0..16)
// so microbatch k's activations live F -> B: 0: 0-4, 1: 1-6, 2: 2-8, 3: 3-10, 4: 5-12, 5: 7-13,
// 6: 9-14, 7: 11-15 (lengths 4 5 6 7 7 6 5 4); at most 4 are held at once (after F3).
#include "stagecraft/schedules/offload.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "generator_cases.h"
#include "stagecraft/schedules/analysis.h"
#include "stagecraft/schedules/generators.h"
#include "stagecraft/schedules/lifetimes.h"
#include "stagecraft/schedules/lower.h"
#include "stagecraft/schedules/validate.h"

namespace stagecraft::schedules {
namespace {

Schedule OneFOneB() { return Generate("1f1b", test_cases::Params(4, 8)); }

// Rank 0's list as action strings, compute and copies.
std::vector<std::string> Actions(const Schedule& s) {
  std::vector<std::string> out;
  for (const Op& op : s.ops[0]) out.push_back(ActionString(op, s.microbatches));
  return out;
}

int DevicePeak(const std::vector<Op>& ops) {
  return static_cast<int>(PeakHeld(ops, ops.size(), [](const Op&) { return int64_t{1}; }).weight);
}

TEST(ActivationOffload, HalfOfTheFirstStageSpreadEvenly) {
  const Schedule base = OneFOneB();
  ASSERT_EQ(Actions(base), (std::vector<std::string>{"0F0", "0F1", "0F2", "0F3", "0B0", "0F4", "0B1", "0F5", "0B2",
                                                     "0F6", "0B3", "0F7", "0B4", "0B5", "0B6", "0B7", "0STEP1"}));
  // Half of 8, spread evenly in F order: the middle of each pair, 1, 3, 5 and 7, each reloaded
  // just before its B (lookahead 0).
  const Schedule s = PlaceActivationOffloads(base, {.fraction = {0.5, 0, 0, 0}, .lookahead = 0});
  EXPECT_EQ(Actions(s), (std::vector<std::string>{
                            "0F0", "0F1", "0OFFLOAD_ACT1", "0F2", "0F3", "0OFFLOAD_ACT3", "0B0", "0F4",
                            "0RELOAD_ACT1", "0B1", "0F5", "0OFFLOAD_ACT5", "0B2", "0F6", "0RELOAD_ACT3", "0B3", "0F7",
                            "0OFFLOAD_ACT7", "0B4", "0RELOAD_ACT5", "0B5", "0B6", "0RELOAD_ACT7", "0B7", "0STEP1"}));
  for (int r = 1; r < 4; ++r) EXPECT_EQ(s.ops[r], base.ops[r]) << "rank " << r;
  // On the device, by hand: 0, 0 1, OFFLOAD 1: 0, 0 2, 0 2 3 at F3 (3), OFFLOAD 3: 0 2, ...;
  // at most 3 (at F3, F5 and F7); in flight, wherever they are, still 4.
  EXPECT_EQ(DevicePeak(base.ops[0]), 4);
  EXPECT_EQ(DevicePeak(s.ops[0]), 3);
  EXPECT_EQ(PeakInflight(s.ops[0], s.ops[0].size()), 4);
  const ActivationLifetimes lives(s.ops[0]);
  EXPECT_EQ(lives.ResidentBefore(4), 2);  // F3 starts with 0 and 2 on the device, 1 offloaded
  EXPECT_EQ(lives.HeldBefore(4), 3);
  EXPECT_EQ(lives.ResidentBefore(s.ops[0].size()), 0);
  // What Lower and Validate make of it: the copies stay between their F and their B.
  EXPECT_TRUE(Validate(Lower(s)).empty());
}

// A RELOAD a compute op ahead: 1's comes back before F4, 3's before F6, and the cool-down's 5 and
// 7 before B4 and B6: still at most 3 on the device (0 2 3 at F3; 1 2 4 at F4; 3 4 6 at F6).
TEST(ActivationOffload, ALookaheadBringsThemBackEarlier) {
  const Schedule s = PlaceActivationOffloads(OneFOneB(), {.fraction = {0.5, 0, 0, 0}, .lookahead = 1});
  const std::vector<std::string> a = Actions(s);
  const auto at = [&](const std::string& action) { return std::find(a.begin(), a.end(), action) - a.begin(); };
  EXPECT_EQ(at("0RELOAD_ACT1") + 1, at("0F4"));
  EXPECT_EQ(at("0RELOAD_ACT3") + 1, at("0F6"));
  EXPECT_EQ(at("0RELOAD_ACT5") + 1, at("0B4"));
  EXPECT_EQ(at("0RELOAD_ACT7") + 1, at("0B6"));
  EXPECT_EQ(DevicePeak(s.ops[0]), 3);
  EXPECT_TRUE(Validate(Lower(s)).empty());
}

// Every stash of every stage offloaded, reloaded just before its B: one microbatch on a device
// at a time, on every rank. The last rank's B follows its F, so its reload would follow its
// offload at once: it copies none. Placing again adds nothing.
TEST(ActivationOffload, AllOfThemLeaveOneOnTheDevice) {
  const Schedule s = PlaceActivationOffloads(OneFOneB(), {.fraction = {1, 1, 1, 1}, .lookahead = 0});
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(DevicePeak(s.ops[r]), 1) << "rank " << r;
    // 8 F, 8 B, a STEP; on the first three an OFFLOAD and a RELOAD each.
    EXPECT_EQ(s.ops[r].size(), r < 3 ? 17u + 16u : 17u) << "rank " << r;
  }
  EXPECT_TRUE(Validate(Lower(s)).empty());
  EXPECT_EQ(PlaceActivationOffloads(s, {.fraction = {1, 1, 1, 1}, .lookahead = 0}), s);
}

TEST(ActivationOffload, BadFractionsAndLookaheadsAreRefused) {
  const auto refused = [](const ActivationOffload& offload, const std::string& says) {
    try {
      PlaceActivationOffloads(OneFOneB(), offload);
      ADD_FAILURE() << "accepted: " << says;
    } catch (const InputError& e) {
      EXPECT_EQ(std::string(e.what()), says);
    }
  };
  refused({.fraction = {0.5, 1.5}}, "activation offload: the fraction 1.5 of stage 1 is outside [0, 1]");
  refused({.fraction = {-0.25}}, "activation offload: the fraction -0.25 of stage 0 is outside [0, 1]");
  refused({.fraction = {0.5}, .lookahead = -1}, "activation offload: lookahead -1 is negative");
}

}  // namespace
}  // namespace stagecraft::schedules
