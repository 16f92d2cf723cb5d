// The simulator does not price copies between device and host memory yet (issue 54): a schedule
// with an OFFLOAD or RELOAD is refused in one line naming the op, never run as if it had none.
#include <string>

#include <gtest/gtest.h>

#include "sim_test_util.h"
#include "stagecraft/sim/engine.h"

namespace stagecraft::sim::testing {
namespace {

TEST(CopiesRefused, TheSimulatorNamesTheFirstCopy) {
  schedules::Schedule s = Make("gpipe", 2, 2);
  schedules::Op offload;
  offload.kind = schedules::OpKind::kOffload;
  offload.tensor = schedules::Tensor::kActivations;
  s.ops[0].insert(s.ops[0].begin() + 1, offload);  // after 0F0 (lowered: rank 0's list opens with it)
  ASSERT_EQ(s.ops[0][0].kind, schedules::OpKind::kF);
  try {
    Simulate(s, Uniform(2, kMs, kMs, kMs), Node(2), SimConfig{});
    ADD_FAILURE() << "a schedule with a copy was simulated";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()), "gpipe: rank 0 #1 (0OFFLOAD_ACT0) is a copy between device and host memory, "
                                     "which the simulator does not price yet");
  }
}

}  // namespace
}  // namespace stagecraft::sim::testing
