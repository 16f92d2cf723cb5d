// Tests for half_weight_copies.h, the cuda device's record of its 16-bit weight copies, on the
// CPU (plain host arrays stand in for device buffers): a copy serves any span inside its buffer
// and nothing that sticks out; a write anywhere into the buffer stales it and nothing else;
// freeing any part of the buffer drops it and returns its memory.
#include "stagecraft/exec/half_weight_copies.h"

#include <gtest/gtest.h>

#include <vector>

namespace stagecraft::exec {
namespace {

class HalfWeightCopiesTest : public testing::Test {
 protected:
  // Two weight buffers in one array with a gap between them, as separate allocations would be.
  std::vector<float> memory_ = std::vector<float>(300);
  const float* w1_ = memory_.data() + 10;   // [10, 110)
  const float* w2_ = memory_.data() + 150;  // [150, 250)
  int halves1_ = 0, halves2_ = 0;           // stand-ins for the copies' device memory
  HalfWeightCopies copies_;
};

TEST_F(HalfWeightCopiesTest, ACopyHoldsEverySpanInsideItsBufferAndNoneThatSticksOut) {
  HalfWeightCopies::Copy& added = copies_.Add(w1_, 100, &halves1_);
  EXPECT_FALSE(added.current) << "a copy is current once its rounding is queued, not before";
  EXPECT_EQ(copies_.Holding(w1_, 100), &added);
  EXPECT_EQ(copies_.Holding(w1_ + 30, 70), &added);  // a weight matrix at an offset, to the end
  EXPECT_EQ(copies_.Holding(w1_ + 99, 1), &added);
  EXPECT_EQ(copies_.Holding(w1_ + 30, 71), nullptr) << "one float past the buffer";
  EXPECT_EQ(copies_.Holding(w1_ - 1, 2), nullptr) << "one float before it";
  EXPECT_EQ(copies_.Holding(w2_, 10), nullptr) << "another buffer";
  EXPECT_EQ(copies_.Of(w1_, 100), &added);
  EXPECT_EQ(copies_.Of(w1_, 99), nullptr) << "Of wants the exact extent";
  EXPECT_EQ(copies_.Of(w1_ + 1, 99), nullptr);
}

TEST_F(HalfWeightCopiesTest, AWriteAnywhereIntoTheBufferStalesItsCopyAndOnlyIts) {
  copies_.Add(w1_, 100, &halves1_).current = true;
  copies_.Add(w2_, 100, &halves2_).current = true;
  copies_.Written(w1_ + 100, 40);  // the gap between the buffers, [110, 150): touches neither
  copies_.Written(w1_ - 10, 10);   // just before w1
  EXPECT_TRUE(copies_.Of(w1_, 100)->current);
  EXPECT_TRUE(copies_.Of(w2_, 100)->current);
  copies_.Written(w1_ + 99, 1);  // w1's last float (a NaN injected into the weights, say)
  EXPECT_FALSE(copies_.Of(w1_, 100)->current);
  EXPECT_TRUE(copies_.Of(w2_, 100)->current);
  copies_.Written(w1_ + 50, 150);  // a span across both
  EXPECT_FALSE(copies_.Of(w2_, 100)->current);
  copies_.Of(w2_, 100)->current = true;
  copies_.Written(w2_, 0);  // an empty write touches nothing
  EXPECT_TRUE(copies_.Of(w2_, 100)->current);
}

TEST_F(HalfWeightCopiesTest, FreeingAnyPartOfABufferDropsItsCopyAndReturnsItsMemory) {
  copies_.Add(w1_, 100, &halves1_);
  copies_.Add(w2_, 100, &halves2_);
  EXPECT_TRUE(copies_.Forget(w1_ + 100, 40).empty()) << "the gap";
  EXPECT_EQ(copies_.size(), 2u);
  const std::vector<HalfWeightCopies::Copy> dropped = copies_.Forget(w2_, 100);
  ASSERT_EQ(dropped.size(), 1u);
  EXPECT_EQ(dropped[0].base, w2_);
  EXPECT_EQ(dropped[0].floats, 100);
  EXPECT_EQ(dropped[0].halves, &halves2_);
  EXPECT_EQ(copies_.Holding(w2_, 10), nullptr);
  EXPECT_NE(copies_.Holding(w1_, 10), nullptr) << "the other buffer's copy stays";
  EXPECT_EQ(copies_.Forget(w1_ + 40, 1).size(), 1u) << "a part of the buffer is enough";
  EXPECT_TRUE(copies_.empty());
  // A buffer at the same address made again starts with no copy: nothing stale can be read.
  EXPECT_EQ(copies_.Holding(w1_, 100), nullptr);
}

TEST_F(HalfWeightCopiesTest, ForgetAllReturnsEveryCopy) {
  copies_.Add(w1_, 100, &halves1_);
  copies_.Add(w2_, 100, &halves2_);
  EXPECT_EQ(copies_.ForgetAll().size(), 2u);
  EXPECT_TRUE(copies_.empty());
}

}  // namespace
}  // namespace stagecraft::exec
