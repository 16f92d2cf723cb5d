// The op-kind table (op_kinds.h) against DESIGN.md, stated here by hand: names (§2), trace tids
// (§6: 0 compute, 1 send, 2 recv; §9: 3 collective; §10: 4 to host, 5 to device), the cost each pass is priced by (§3: a full
// backward costs backward_input + backward_weight; the metrics' stage keys), the data edges (§2)
// and the memory each op holds (§4: activations from F's start to B/I's end, after I only the W
// stash until W).
#include "stagecraft/schedules/op_kinds.h"

#include <string>

#include <gtest/gtest.h>

#include "stagecraft/schedules/edges.h"
#include "stagecraft/schedules/ir.h"
#include "stagecraft/schedules/metrics.h"

namespace stagecraft::schedules {
namespace {

struct Expected {
  OpKind kind;
  const char* name;
  int tid;
  const char* cost_key;  // nullptr: no per-stage cost
  bool compute, comm, collective;
  int activations;  // +1 holds the unit's activations, -1 frees them
  int w_stash;      // +1 keeps the W stash, -1 frees it
  int device = 0;   // copies: -1 frees the tensor on the device, +1 brings it back
  bool copy = false;
};

// By hand, from DESIGN.md.
const Expected kExpected[] = {
    {OpKind::kF, "F", 0, "forward_ms", true, false, false, +1, 0},
    {OpKind::kB, "B", 0, "backward_ms", true, false, false, -1, 0},
    {OpKind::kI, "I", 0, "backward_input_ms", true, false, false, -1, +1},
    {OpKind::kW, "W", 0, "backward_weight_ms", true, false, false, 0, -1},
    {OpKind::kSendF, "SEND_F", 1, nullptr, false, true, false, 0, 0},
    {OpKind::kRecvF, "RECV_F", 2, nullptr, false, true, false, 0, 0},
    {OpKind::kSendB, "SEND_B", 1, nullptr, false, true, false, 0, 0},
    {OpKind::kRecvB, "RECV_B", 2, nullptr, false, true, false, 0, 0},
    {OpKind::kStep, "STEP", 0, "step_ms", false, false, false, 0, 0},
    {OpKind::kReduceGrad, "REDUCE_GRAD", 3, nullptr, false, false, true, 0, 0},
    {OpKind::kOffload, "OFFLOAD", 4, nullptr, false, false, false, 0, 0, -1, true},
    {OpKind::kReload, "RELOAD", 5, nullptr, false, false, false, 0, 0, +1, true},
    {OpKind::kAllToAll, "ALL_TO_ALL", 3, nullptr, false, false, true, 0, 0},
};

TEST(OpKinds, EveryKindAsDesignStatesIt) {
  ASSERT_EQ(std::size(kExpected), static_cast<size_t>(kNumOpKinds));
  for (const Expected& e : kExpected) {
    SCOPED_TRACE(e.name);
    const OpKindInfo& row = Info(e.kind);
    EXPECT_EQ(KindName(e.kind), e.name);
    OpKind parsed = OpKind::kF;
    EXPECT_TRUE(ParseKind(e.name, &parsed));
    EXPECT_EQ(parsed, e.kind);
    EXPECT_EQ(static_cast<int>(row.stream), e.tid);
    EXPECT_EQ(IsCompute(e.kind), e.compute);
    EXPECT_EQ(IsComm(e.kind), e.comm);
    EXPECT_EQ(IsCollective(e.kind), e.collective);
    EXPECT_EQ(row.memory.activations, e.activations);
    EXPECT_EQ(row.memory.w_stash, e.w_stash);
    EXPECT_EQ(row.memory.device, e.device);
    EXPECT_EQ(IsCopy(e.kind), e.copy);
    EXPECT_EQ(RunsOnCompute(e.kind), e.tid == 0);
    const int cost = CostIndex(e.kind);
    if (e.cost_key == nullptr) {
      EXPECT_EQ(cost, -1);
    } else {
      ASSERT_GE(cost, 0);
      EXPECT_EQ(std::string(kStageCostFields[cost].key), e.cost_key);
      EXPECT_EQ(kStageCostFields[cost].kind, e.kind);
    }
  }
  OpKind unused = OpKind::kF;
  EXPECT_FALSE(ParseKind("UNSHARD", &unused));  // PyTorch's, not the IR's
  EXPECT_FALSE(ParseKind("offload", &unused));
}

TEST(OpKinds, EdgesFollowTheFlowOfData) {
  // Activations leave F (SEND_F) and enter F (RECV_F); gradients leave B/I (SEND_B), enter B/I (RECV_B).
  EXPECT_TRUE(IsConsumerOf(OpKind::kF, Flow::kActivation));
  EXPECT_TRUE(IsConsumerOf(OpKind::kB, Flow::kGradient));
  EXPECT_TRUE(IsConsumerOf(OpKind::kI, Flow::kGradient));
  EXPECT_FALSE(IsConsumerOf(OpKind::kW, Flow::kGradient));
  EXPECT_FALSE(IsConsumerOf(OpKind::kRecvF, Flow::kActivation));  // a RECV receives, it does not consume
  EXPECT_EQ(CommKindOf(Stream::kSend, Flow::kActivation), OpKind::kSendF);
  EXPECT_EQ(CommKindOf(Stream::kRecv, Flow::kActivation), OpKind::kRecvF);
  EXPECT_EQ(CommKindOf(Stream::kSend, Flow::kGradient), OpKind::kSendB);
  EXPECT_EQ(CommKindOf(Stream::kRecv, Flow::kGradient), OpKind::kRecvB);
  const Shape shape{3, 1, Placement::kLoop};
  const auto in = InputEdge(shape, Op{OpKind::kB, 1, 2, 0, 0});
  ASSERT_TRUE(in.has_value());
  EXPECT_EQ(in->flow, Flow::kGradient);
  EXPECT_EQ(in->from_stage, 2);
  EXPECT_FALSE(InputEdge(shape, Op{OpKind::kW, 1, 2, 0, 0}).has_value());
  EXPECT_FALSE(OutputEdge(shape, Op{OpKind::kStep, 1, 0, 0, 1}).has_value());
}

TEST(OpKinds, StepAndReduceGradNameTheirVersion) {
  // DESIGN.md §2 / ir.h: "<stage>STEP<version>", "<stage>REDUCE_GRAD<version>"; others the global microbatch.
  EXPECT_EQ(ActionString(Op{OpKind::kStep, 1, 3, 1, 2}, 4), "1STEP2");
  EXPECT_EQ(ActionString(Op{OpKind::kReduceGrad, 0, 3, 1, 2}, 4), "0REDUCE_GRAD2");
  EXPECT_EQ(ActionString(Op{OpKind::kSendB, 2, 3, 1, 0, 1}, 4), "2SEND_B7");
  EXPECT_TRUE(ProducesVersion(OpKind::kStep));
  EXPECT_TRUE(ReducesGradients(OpKind::kReduceGrad));
  EXPECT_TRUE(RunsOnCompute(OpKind::kStep));
  EXPECT_FALSE(RunsOnCompute(OpKind::kReduceGrad));
  // The unit-time grid's lengths (analysis.h): F = I = W = 1, B = 2.
  EXPECT_EQ(Info(OpKind::kF).unit_time + Info(OpKind::kI).unit_time + Info(OpKind::kW).unit_time, 3);
  EXPECT_EQ(Info(OpKind::kB).unit_time, 2);
}

}  // namespace
}  // namespace stagecraft::schedules
