// Tests for exec/src/backend.cpp's host decisions: which backend `--backend` names for each
// verdict of `stagecraft devices`, and the lines a failed start-up prints for the job. (The
// start-up's agreement itself runs under mpirun: tests/cli/execute_startup_cli.sh.)
#include "stagecraft/exec/backend.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "stagecraft/base/error.h"

namespace stagecraft::exec {
namespace {

DevicesVerdict Verdict(DevicesStatus status, std::string reason = "") {
  DevicesVerdict v;
  v.status = status;
  v.reason = std::move(reason);
  return v;
}

// The InputError's message of `flag` under `v`, or "" when it chose without one.
std::string ErrorOf(const char* flag, const DevicesVerdict& v) {
  try {
    ChooseBackend(flag, v);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(BackendTest, CpuIsAlwaysCpu) {
  for (const DevicesStatus s : {DevicesStatus::kUsable, DevicesStatus::kNoCudaBackend, DevicesStatus::kNoGpu,
                                DevicesStatus::kUnusable}) {
    EXPECT_EQ(ChooseBackend("cpu", Verdict(s, "why")), Backend::kCpu);
  }
}

TEST(BackendTest, AutoIsCudaOnlyWhenUsableAndRefusesABrokenGpu) {
  EXPECT_EQ(ChooseBackend("auto", Verdict(DevicesStatus::kUsable)), Backend::kCuda);
  EXPECT_EQ(ChooseBackend("auto", Verdict(DevicesStatus::kNoGpu, "no CUDA device was found")), Backend::kCpu);
  EXPECT_EQ(ChooseBackend("auto", Verdict(DevicesStatus::kNoCudaBackend, "no backend")), Backend::kCpu);
  const std::string e = ErrorOf("auto", Verdict(DevicesStatus::kUnusable, "GPU 0 (X): its compute mode is Prohibited"));
  EXPECT_NE(e.find("--backend auto: this machine has a GPU that this build cannot use: GPU 0 (X): its compute mode"),
            std::string::npos)
      << e;
}

TEST(BackendTest, CudaNamesWhyItIsNotUsable) {
  EXPECT_EQ(ChooseBackend("cuda", Verdict(DevicesStatus::kUsable)), Backend::kCuda);
  EXPECT_EQ(ErrorOf("cuda", Verdict(DevicesStatus::kNoGpu, "no CUDA device was found: no driver")),
            "--backend cuda: no CUDA device was found: no driver");
  EXPECT_EQ(ErrorOf("cuda", Verdict(DevicesStatus::kUnusable, "the driver is old")),
            "--backend cuda: the driver is old");
  EXPECT_NE(ErrorOf("gpu", Verdict(DevicesStatus::kUsable)).find("expected cpu, cuda or auto, got 'gpu'"),
            std::string::npos);
}

TEST(BackendTest, StartupFailureLinesGroupRanksByCause) {
  EXPECT_TRUE(StartupFailureLines({"", ""}, {"a", "a"}).empty());
  EXPECT_EQ(StartupFailureLines({"", "boom"}, {"", "node1"}), std::vector<std::string>{"rank 1 (node1): boom"});
  EXPECT_EQ(StartupFailureLines({"same", "same", "", "same"}, {"n0", "n0", "", "n3"}),
            std::vector<std::string>{"ranks 0, 1, 3 (n0, n3): same"});
  EXPECT_EQ(StartupFailureLines({"b", "a", "b"}, {"h", "h", "h"}),
            (std::vector<std::string>{"ranks 0, 2 (h): b", "rank 1 (h): a"}));
  EXPECT_EQ(StartupFailureLines({"x"}, {}), std::vector<std::string>{"rank 0: x"});  // no host known
}

TEST(BackendTest, StepsHaveNamesForTheirMessages) {
  EXPECT_EQ(StartupStepName(StartupStep::kDevice), "making the device");
  EXPECT_EQ(StartupStepName(StartupStep::kTransport), "connecting the ranks");
}

}  // namespace
}  // namespace stagecraft::exec
