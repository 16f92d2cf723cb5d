// The spilled schedule (generators/spilled.cpp, Hydra's shard at a time) by hand: one rank, its
// shards' forwards in order, then their backwards in reverse, each shard's STEP after its last
// backward; one device only; named, never part of "all".
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "generator_cases.h"
#include "stagecraft/base/error.h"
#include "stagecraft/schedules/generators.h"
#include "stagecraft/schedules/lower.h"
#include "stagecraft/schedules/offload.h"
#include "stagecraft/schedules/validate.h"

namespace stagecraft::schedules {
namespace {

TEST(Spilled, ShardsInTurnThenBackInReverse) {
  const Schedule s = Generate("spilled", test_cases::Params(1, 2, 1, 3));
  ASSERT_EQ(s.ranks(), 1);
  ASSERT_EQ(s.stages(), 3);
  EXPECT_EQ(test_cases::Actions(s.ops[0], 2), "0F0 0F1 1F0 1F1 2F0 2F1 2B0 2B1 2STEP1 1B0 1B1 1STEP1 0B0 0B1 0STEP1");
  EXPECT_TRUE(Validate(Lower(s)).empty());
  // Spilled, without double buffering: each shard's weights in for its turn, out after.
  const Schedule spilled = PlaceWeightSpill(s, {.double_buffer = false});
  EXPECT_EQ(test_cases::Actions(spilled.ops[0], 2),
            "0RELOAD_WEIGHT0 0F0 0F1 0OFFLOAD_WEIGHT0 1RELOAD_WEIGHT0 1F0 1F1 1OFFLOAD_WEIGHT0 "
            "2RELOAD_WEIGHT0 2F0 2F1 2B0 2B1 2RELOAD_OPT1 2STEP1 2OFFLOAD_OPT2 2OFFLOAD_WEIGHT1 "
            "1RELOAD_WEIGHT0 1B0 1B1 1RELOAD_OPT1 1STEP1 1OFFLOAD_OPT2 1OFFLOAD_WEIGHT1 "
            "0RELOAD_WEIGHT0 0B0 0B1 0RELOAD_OPT1 0STEP1 0OFFLOAD_OPT2 0OFFLOAD_WEIGHT1");
  EXPECT_TRUE(Validate(Lower(spilled)).empty());
}

TEST(Spilled, OneDeviceOnly) {
  try {
    Generate("spilled", test_cases::Params(2, 2, 1, 3));
    ADD_FAILURE() << "two ranks";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("spilled runs its shards one after another on one device: ranks must be 1"),
              std::string::npos)
        << e.what();
  }
  const GeneratorInfo* info = FindGenerator("spilled");
  ASSERT_NE(info, nullptr);
  EXPECT_FALSE(info->in_all);
}

}  // namespace
}  // namespace stagecraft::schedules
