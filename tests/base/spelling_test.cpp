// Edit distance and the nearest name (base/spelling.h) against hand-counted edits.
#include "stagecraft/base/spelling.h"

#include <string_view>
#include <vector>

#include <gtest/gtest.h>

namespace stagecraft {
namespace {

TEST(EditDistance, CountsInsertionsDeletionsAndSubstitutions) {
  EXPECT_EQ(EditDistance("", ""), 0u);
  EXPECT_EQ(EditDistance("gpus", "gpus"), 0u);
  EXPECT_EQ(EditDistance("gpu", "gpus"), 1u);        // one insertion
  EXPECT_EQ(EditDistance("microbatchs", "microbatches"), 1u);
  EXPECT_EQ(EditDistance("H100-SMX", "H100-SXM"), 2u);  // a swap is two substitutions
  EXPECT_EQ(EditDistance("kitten", "sitting"), 3u);
  EXPECT_EQ(EditDistance("abc", ""), 3u);
}

TEST(NearestName, TheNearestWithinTheEditsElseNone) {
  const std::vector<std::string_view> flags = {"--gpus", "--global-batch", "--json"};
  EXPECT_EQ(NearestName("--gpu", flags), "--gpus");
  EXPECT_EQ(NearestName("--jsn", flags), "--json");
  EXPECT_EQ(NearestName("--threads", flags), "");
  const std::vector<std::string_view> devices = {"A100-SXM-80GB", "H100-SXM", "H200"};
  EXPECT_EQ(NearestName("h100-smx", devices), "");                           // three edits as typed
  EXPECT_EQ(NearestName("h100-smx", devices, 2, /*ignore_case=*/true), "H100-SXM");
  EXPECT_EQ(NearestName("H20", devices, 1), "H200");
  EXPECT_EQ(NearestName("x", {}), "");
}

}  // namespace
}  // namespace stagecraft
