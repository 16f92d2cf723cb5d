// The stop flag a long computation looks at (base/stop.h): no flag never stops, an unset one
// never stops, a set one stops at the next look, and StopCheck looks once every kEvery calls.
#include "stagecraft/base/stop.h"

#include <atomic>

#include <gtest/gtest.h>

namespace stagecraft {
namespace {

TEST(StopTest, ThrowsOnlyWhenTheFlagIsSet) {
  EXPECT_NO_THROW(ThrowIfStopped(nullptr));
  std::atomic<bool> stop{false};
  EXPECT_NO_THROW(ThrowIfStopped(&stop));
  stop = true;
  EXPECT_THROW(ThrowIfStopped(&stop), StopRequested);
}

TEST(StopTest, StopCheckLooksOnceEveryKEveryCalls) {
  std::atomic<bool> stop{true};  // set from the start: the first look throws
  StopCheck check(&stop);
  for (uint32_t call = 1; call < StopCheck::kEvery; ++call) ASSERT_NO_THROW(check()) << "call " << call;
  EXPECT_THROW(check(), StopRequested);  // call kEvery
  for (uint32_t call = 1; call < StopCheck::kEvery; ++call) ASSERT_NO_THROW(check()) << "call " << call;
  EXPECT_THROW(check(), StopRequested);  // call 2 x kEvery
}

TEST(StopTest, NowLooksWhateverTheCount) {
  std::atomic<bool> stop{false};
  StopCheck check(&stop);
  EXPECT_EQ(check.flag(), &stop);
  EXPECT_NO_THROW(check.Now());
  stop = true;
  EXPECT_THROW(check.Now(), StopRequested);  // no call counted yet
  EXPECT_NO_THROW(StopCheck(nullptr).Now());
}

TEST(StopTest, StopCheckWithoutAFlagNeverThrows) {
  StopCheck none(nullptr);
  for (uint32_t call = 0; call < 3 * StopCheck::kEvery; ++call) ASSERT_NO_THROW(none());
  std::atomic<bool> unset{false};
  StopCheck never(&unset);
  for (uint32_t call = 0; call < 3 * StopCheck::kEvery; ++call) ASSERT_NO_THROW(never());
}

}  // namespace
}  // namespace stagecraft
