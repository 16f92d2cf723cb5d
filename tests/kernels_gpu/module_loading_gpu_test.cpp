// Tests for cuda.h's module loading: PreferEagerModuleLoading sets CUDA_MODULE_LOADING=EAGER
// when the environment names no mode and leaves a user's choice alone (on any machine); on a GPU,
// the mode it asks for is the mode CUDA then applies, and every launcher's kernels preload.
// A global environment asks before any test makes a CUDA call, as the cuda device does before
// its first one.
#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>
#include <string>

#include "gpu_test_support.h"
#include "stagecraft/kernels/cuda.h"
#include "stagecraft/kernels/cuda_check.h"

namespace stagecraft::kernels {
namespace {

// The variable as the test process started with it (nullopt: unset), and whether the call set it.
std::optional<std::string> g_before;
bool g_set = false;

class EagerBeforeAnyCudaCall : public testing::Environment {
 public:
  void SetUp() override {
    if (const char* value = std::getenv(kModuleLoadingVariable)) g_before = value;
    g_set = PreferEagerModuleLoading();
  }
};
testing::Environment* const g_eager = testing::AddGlobalTestEnvironment(new EagerBeforeAnyCudaCall);

TEST(ModuleLoadingTest, EagerIsAskedForUnlessTheEnvironmentNamesAMode) {
  const char* now = std::getenv(kModuleLoadingVariable);
  ASSERT_NE(now, nullptr);
  if (g_before) {
    EXPECT_FALSE(g_set);
    EXPECT_EQ(std::string(now), *g_before) << "a mode the user chose stays";
  } else {
    EXPECT_TRUE(g_set);
    EXPECT_EQ(std::string(now), "EAGER");
  }
  // Idempotent: a second call changes nothing and answers the same.
  EXPECT_EQ(PreferEagerModuleLoading(), g_set);
  EXPECT_EQ(std::string(std::getenv(kModuleLoadingVariable)), std::string(now));
}

TEST(ModuleLoadingTest, CudaAppliesTheModeAskedForAndEveryKernelPreloads) {
  if (!gpu_test::NoDeviceReason().empty()) GTEST_SKIP() << "no CUDA device: " << gpu_test::NoDeviceReason();
  SC_CUDA_CHECK(cudaSetDevice(0));
  EXPECT_NO_THROW(PreloadKernels());
  const ModuleLoading mode = ModuleLoadingInForce();
  if (mode == ModuleLoading::kUnknown) GTEST_SKIP() << "this CUDA cannot report its loading mode";
  if (!g_set) GTEST_SKIP() << kModuleLoadingVariable << " was " << g_before.value_or("?") << " from the environment";
  EXPECT_EQ(mode, ModuleLoading::kEager) << "set before the first CUDA call, CUDA_MODULE_LOADING=EAGER must hold";
  testing::internal::CaptureStderr();
  WarnIfEagerLoadingDidNotTakeHold();
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "") << "no warning when eager loading holds";
}

}  // namespace
}  // namespace stagecraft::kernels
