// Injected faults (exec/src/fault_injector.cpp) on the cpu device: when one is due (its rank,
// its step, a compute op, not yet hit) and what each kind does. kHang never returns and is
// tested end to end by the CLI's fault tests.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <stdexcept>
#include <string>

#include "stagecraft/exec/cpu_device.h"
#include "stagecraft/exec/fault_injector.h"

namespace stagecraft::exec {
namespace {

using schedules::Op;
using schedules::OpKind;

RunHooks Fault(RunHooks::Fault kind) {
  RunHooks h;
  h.fault_rank = 1;
  h.fault_step = 2;
  h.fault = kind;
  return h;
}

TEST(FaultInjector, DueAtAComputeOpOfItsStepOnItsRank) {
  const RunHooks h = Fault(RunHooks::Fault::kThrow);
  const FaultInjector here(h, 1), elsewhere(h, 0);
  for (const OpKind kind : {OpKind::kF, OpKind::kB, OpKind::kI, OpKind::kW}) {
    EXPECT_TRUE(here.Due({.kind = kind, .step = 2}));
    EXPECT_FALSE(here.Due({.kind = kind, .step = 1}));
    EXPECT_FALSE(elsewhere.Due({.kind = kind, .step = 2}));
  }
  for (const OpKind kind : {OpKind::kStep, OpKind::kSendF, OpKind::kRecvB}) EXPECT_FALSE(here.Due({.kind = kind, .step = 2}));
  EXPECT_FALSE(FaultInjector(RunHooks{}, 0).Due({.kind = OpKind::kF}));
}

TEST(FaultInjector, ThrowNamesTheStep) {
  auto device = MakeCpuDevice();
  FaultInjector f(Fault(RunHooks::Fault::kThrow), 1);
  try {
    f.Inject({.kind = OpKind::kF, .step = 2}, 4, *device, nullptr);
    FAIL() << "throws";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), "injected fault at step 2 (--inject-fault)");
  }
}

TEST(FaultInjector, NanPoisonsOneWeightOnce) {
  auto device = MakeCpuDevice();
  Buffer w(*device, 3);
  device->memory().Fill(w.data(), 1.0f, 3);
  FaultInjector f(Fault(RunHooks::Fault::kNan), 1);
  const Op op{.kind = OpKind::kB, .step = 2};
  ASSERT_TRUE(f.Due(op));
  f.Inject(op, 4, *device, w.data());
  EXPECT_TRUE(std::isnan(w.data()[0]));
  EXPECT_EQ(w.data()[1], 1.0f);
  EXPECT_EQ(w.data()[2], 1.0f);
  EXPECT_FALSE(f.Due(op)) << "once";
}

TEST(FaultInjector, OomIsARealAllocationFailureNamingTheOp) {
  auto device = MakeCpuDevice();
  FaultInjector f(Fault(RunHooks::Fault::kOom), 1);
  const Op op{.kind = OpKind::kF, .stage = 1, .microbatch = 1, .step = 2};
  const int64_t held = device->memory().bytes_in_use();
  try {
    f.Inject(op, 4, *device, nullptr);
    FAIL() << "throws";
  } catch (const OutOfMemory& e) {
    EXPECT_EQ(std::string(e.what()).rfind("out of memory at 1F9 (step 2): ", 0), 0u) << e.what();
    EXPECT_NE(std::string(e.what()).find("(--inject-fault)"), std::string::npos) << e.what();
  }
  EXPECT_EQ(device->memory().bytes_in_use(), held);
  EXPECT_FALSE(f.Due(op));
}

}  // namespace
}  // namespace stagecraft::exec
