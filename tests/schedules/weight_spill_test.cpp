// Spilled weights (offload.h PlaceWeightSpill, Hydra's shard at a time) placed on interleaved 1F1B
// and checked by hand: a RELOAD of each visit's weights (with double buffering, and then with the
// optimizer state of its STEP, over the whole visit before), an OFFLOAD after it, the optimizer
// state around each STEP, and what starts on the host (tensors.h StartOnHost).
#include <algorithm>
#include <string>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "generator_cases.h"
#include "stagecraft/base/error.h"
#include "stagecraft/schedules/generators.h"
#include "stagecraft/schedules/lower.h"
#include "stagecraft/schedules/offload.h"
#include "stagecraft/schedules/tensors.h"
#include "stagecraft/schedules/validate.h"

namespace stagecraft::schedules {
namespace {

// Rank 0 of interleaved over 2 ranks, 2 chunks, 2 microbatches holds stages 0 and 2:
// 0F0 0F1 2F0 2F1 2B0 2B1 2STEP1 0B0 0B1 0STEP1: three visits (stage 0, 2, 0).
Schedule Interleaved(int steps = 1) { return Generate("interleaved", test_cases::Params(2, 2, steps, 2)); }

TEST(WeightSpill, DoubleBufferedOnInterleaved) {
  const Schedule plain = Interleaved();
  ASSERT_EQ(test_cases::Actions(plain.ops[0], 2), "0F0 0F1 2F0 2F1 2B0 2B1 2STEP1 0B0 0B1 0STEP1");
  const Schedule s = PlaceWeightSpill(plain, {.double_buffer = true});
  EXPECT_EQ(test_cases::Actions(s.ops[0], 2),
            "0RELOAD_WEIGHT0 2RELOAD_WEIGHT0 2RELOAD_OPT1 0F0 0F1 0OFFLOAD_WEIGHT0 0RELOAD_WEIGHT0 0RELOAD_OPT1 "
            "2F0 2F1 2B0 2B1 2STEP1 2OFFLOAD_OPT2 2OFFLOAD_WEIGHT1 "
            "0B0 0B1 0STEP1 0OFFLOAD_OPT2 0OFFLOAD_WEIGHT1");
  EXPECT_TRUE(Validate(s).empty());
  EXPECT_TRUE(Validate(Lower(s)).empty()) << "lowering keeps the copies valid";
  const std::vector<TensorKey> want = {{Tensor::kWeights, 0, 0, 0, 0},
                                       {Tensor::kWeights, 2, 0, 0, 0},
                                       {Tensor::kOptimizer, 0, 0, 0, 1},
                                       {Tensor::kOptimizer, 2, 0, 0, 1}};
  std::vector<TensorKey> got = StartOnHost(s.ops[0]);
  std::sort(got.begin(), got.end(), [](const TensorKey& a, const TensorKey& b) {
    return std::tie(a.tensor, a.stage) < std::tie(b.tensor, b.stage);
  });
  EXPECT_EQ(got, want);
}

TEST(WeightSpill, WithoutDoubleBufferingEachVisitWaitsForItsWeights) {
  const Schedule s = PlaceWeightSpill(Interleaved(), {.double_buffer = false});
  EXPECT_EQ(test_cases::Actions(s.ops[0], 2),
            "0RELOAD_WEIGHT0 0F0 0F1 0OFFLOAD_WEIGHT0 "
            "2RELOAD_WEIGHT0 2F0 2F1 2B0 2B1 2RELOAD_OPT1 2STEP1 2OFFLOAD_OPT2 2OFFLOAD_WEIGHT1 "
            "0RELOAD_WEIGHT0 0B0 0B1 0RELOAD_OPT1 0STEP1 0OFFLOAD_OPT2 0OFFLOAD_WEIGHT1");
  EXPECT_TRUE(Validate(s).empty());
}

// Two steps: the optimizer state goes back to the host after each STEP, for the next update.
TEST(WeightSpill, TheOptimizerStateTravelsBetweenSteps) {
  const Schedule s = PlaceWeightSpill(Interleaved(2), {.double_buffer = false});
  EXPECT_TRUE(Validate(s).empty());
  int offloads = 0, reloads = 0;
  for (const Op& op : s.ops[0]) {
    if (op.tensor != Tensor::kOptimizer) continue;
    (op.kind == OpKind::kOffload ? offloads : reloads) += 1;
    if (op.kind == OpKind::kOffload) {
      EXPECT_TRUE(op.version == 2 || op.version == 3) << "for the next update";
    }
  }
  EXPECT_EQ(reloads, 4);   // 2 stages x 2 STEPs
  EXPECT_EQ(offloads, 4);  // after each
}

TEST(WeightSpill, AScheduleWithCopiesIsRefused) {
  Schedule s = PlaceWeightSpill(Interleaved(), {});
  EXPECT_THROW(PlaceWeightSpill(s, {}), InputError);
}

// dualpipe-v's overlapped F;B pairs must stay adjacent: neither copy placement takes them yet.
TEST(WeightSpill, OverlappedPairsAreRefusedByBothPlacements) {
  const Schedule s = Generate("dualpipe-v", test_cases::Params(2, 8, 1, 2));
  ASSERT_TRUE(std::any_of(s.ops[0].begin(), s.ops[0].end(), [](const Op& op) { return op.overlapped; }));
  const auto error = [](auto place) {
    try {
      place();
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_EQ(error([&] { PlaceWeightSpill(s, {}); }),
            "dualpipe-v: weight spill is not placed on a schedule with overlapped F;B pairs yet");
  EXPECT_EQ(error([&] { PlaceActivationOffloads(s, {.fraction = {0.5, 0.5, 0.5, 0.5}}); }),
            "dualpipe-v: activation offload is not placed on a schedule with overlapped F;B pairs yet");
  EXPECT_EQ(error([&] { PlaceActivationOffloads(s, {.fraction = {0, 0, 0, 0}}); }), "") << "nothing to place";
}

// The first read of a spilled stage before its RELOAD is named.
TEST(WeightSpill, AReadBeforeTheFirstReloadIsNamed) {
  Schedule s = PlaceWeightSpill(Interleaved(), {.double_buffer = false});
  std::swap(s.ops[0][0], s.ops[0][1]);  // 0F0 before 0RELOAD_WEIGHT0
  const std::vector<Diagnostic> diags = Validate(s);
  ASSERT_FALSE(diags.empty());  // the read, then the RELOAD of what is no longer away
  EXPECT_NE(diags[0].message.find("reads version 0 of stage 0's weights while it is on the host from the start"),
            std::string::npos)
      << diags[0].message;
}

}  // namespace
}  // namespace stagecraft::schedules
