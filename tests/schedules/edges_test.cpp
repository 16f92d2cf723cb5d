// schedules/edges.cpp: the one data-edge rule, checked on hand-worked placements (loop and V),
// and on every generated schedule: each SEND/RECV the lowering placed is exactly one edge that
// crosses ranks, and every such edge has exactly one SEND and one RECV.
#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <set>

#include "generator_cases.h"
#include "stagecraft/schedules/edges.h"
#include "stagecraft/schedules/lower.h"
#include "stagecraft/schedules/weights.h"

namespace stagecraft::schedules {
namespace {

// An op of `kind` at `stage`, microbatch and step as given (version 0, no peer).
Op MakeOp(OpKind kind, int stage, int microbatch = 0, int step = 0) { return Op{kind, stage, microbatch, step}; }

// 2 ranks x 2 chunks = 4 stages. Loop: stages 0..3 on ranks 0, 1, 0, 1. V: 0, 1, 1, 0.
constexpr Shape kLoop{2, 2, Placement::kLoop};
constexpr Shape kV{2, 2, Placement::kV};

TEST(EdgesTest, ForwardReadsActivationsOfThePreviousStage) {
  EXPECT_FALSE(InputEdge(kLoop, MakeOp(OpKind::kF, 0)));
  const Edge e = *InputEdge(kLoop, MakeOp(OpKind::kF, 2, 3, 1));
  EXPECT_EQ(e, (Edge{Flow::kActivation, 1, 2, 1, 3, 1, 0}));
  EXPECT_TRUE(e.CrossesRanks());
  // Under V, stages 1 and 2 both live on rank 1: the same edge stays on the rank.
  const Edge v = *InputEdge(kV, MakeOp(OpKind::kF, 2, 3, 1));
  EXPECT_EQ(v.from_rank, 1);
  EXPECT_EQ(v.to_rank, 1);
  EXPECT_FALSE(v.CrossesRanks());
}

TEST(EdgesTest, BackwardReadsGradientsOfTheNextStageExceptOnTheLastStage) {
  EXPECT_FALSE(InputEdge(kLoop, MakeOp(OpKind::kB, 3)));  // the loss, computed by its own F
  EXPECT_FALSE(InputEdge(kLoop, MakeOp(OpKind::kI, 3)));
  EXPECT_EQ(*InputEdge(kLoop, MakeOp(OpKind::kI, 1, 2)), (Edge{Flow::kGradient, 2, 1, 0, 2, 0, 1}));
  EXPECT_EQ(*InputEdge(kV, MakeOp(OpKind::kB, 2)), (Edge{Flow::kGradient, 3, 2, 0, 0, 0, 1}));
  EXPECT_FALSE(InputEdge(kLoop, MakeOp(OpKind::kW, 1)));
  EXPECT_FALSE(InputEdge(kLoop, MakeOp(OpKind::kStep, 1)));
}

TEST(EdgesTest, OutputsMirrorInputs) {
  EXPECT_FALSE(OutputEdge(kLoop, MakeOp(OpKind::kF, 3)));
  EXPECT_FALSE(OutputEdge(kLoop, MakeOp(OpKind::kB, 0)));
  EXPECT_FALSE(OutputEdge(kLoop, MakeOp(OpKind::kW, 2)));
  EXPECT_EQ(*OutputEdge(kV, MakeOp(OpKind::kF, 0)), (Edge{Flow::kActivation, 0, 1, 0, 0, 0, 1}));
  EXPECT_EQ(*OutputEdge(kV, MakeOp(OpKind::kI, 3)), (Edge{Flow::kGradient, 3, 2, 0, 0, 0, 1}));
  for (const Shape& shape : {kLoop, kV}) {
    for (int stage = 0; stage < 3; ++stage) {
      EXPECT_EQ(OutputEdge(shape, MakeOp(OpKind::kF, stage)), InputEdge(shape, MakeOp(OpKind::kF, stage + 1)));
      EXPECT_EQ(OutputEdge(shape, MakeOp(OpKind::kB, stage + 1)), InputEdge(shape, MakeOp(OpKind::kI, stage)));
    }
  }
}

// Found by the CSV fuzz harness: "2147483647SEND_F0" overflowed stage + 1 (UB) before the
// range check. Out-of-range stages at either end of int have no edge and no peer.
TEST(EdgesTest, StagesAtTheEndsOfIntHaveNoEdge) {
  for (const Shape& shape : {kLoop, kV}) {
    for (const int stage : {INT32_MIN, -1, 4, INT32_MAX}) {
      for (const OpKind kind : {OpKind::kF, OpKind::kB, OpKind::kI, OpKind::kSendF, OpKind::kSendB, OpKind::kRecvF,
                                OpKind::kRecvB}) {
        EXPECT_FALSE(InputEdge(shape, MakeOp(kind, stage)));
        EXPECT_FALSE(OutputEdge(shape, MakeOp(kind, stage)));
        EXPECT_EQ(PeerOf(shape, MakeOp(kind, stage)), -1);
      }
    }
  }
}

TEST(EdgesTest, SendAndRecvCarryTheEdgeAndNameThePeer) {
  const Edge e = *OutputEdge(kLoop, MakeOp(OpKind::kB, 2, 5, 1));  // stage 2 (rank 0) -> 1 (rank 1)
  const Op send = SendOf(e), recv = RecvOf(e);
  EXPECT_EQ(send, (Op{OpKind::kSendB, 2, 5, 1, 0, 1}));
  EXPECT_EQ(recv, (Op{OpKind::kRecvB, 1, 5, 1, 0, 0}));
  EXPECT_EQ(CommEdge(kLoop, send), e);
  EXPECT_EQ(CommEdge(kLoop, recv), e);
  EXPECT_EQ(PeerOf(kLoop, send), 1);
  EXPECT_EQ(PeerOf(kLoop, recv), 0);
  EXPECT_EQ(PeerOf(kLoop, MakeOp(OpKind::kSendF, 3)), -1);  // the last stage sends no activations
  EXPECT_EQ(PeerOf(kLoop, MakeOp(OpKind::kRecvB, 3)), -1);
  EXPECT_EQ(PeerOf(kLoop, MakeOp(OpKind::kF, 1)), -1);
}

TEST(EdgesTest, EdgeKeysAreDenseAndUnique) {
  Schedule s;
  s.shape = kV;
  s.microbatches = 3;
  s.steps = 2;
  const UnitIndex units(s);
  std::set<size_t> keys;
  int edges = 0;
  ForEachEdge(s, [&](const Edge& e) {
    ++edges;
    keys.insert(EdgeKey(units, e));
    EXPECT_LT(EdgeKey(units, e), EdgeKeyCount(units));
  });
  EXPECT_EQ(edges, 2 * 2 * 3 * 3);  // both flows x steps x stage boundaries x microbatches
  EXPECT_EQ(keys.size(), static_cast<size_t>(edges));
}

TEST(EdgesTest, EveryCommOpOfEveryLoweredScheduleIsOneCrossRankEdge) {
  for (const auto& c : test_cases::SmallGeneratorCases()) {
    const Schedule s = Lower(Generate(c.info->name, c.params));
    std::map<size_t, int> sends, recvs;
    const UnitIndex units(s);
    for (int r = 0; r < s.ranks(); ++r) {
      for (const Op& op : s.ops[r]) {
        if (!IsComm(op.kind)) continue;
        const auto e = CommEdge(s.shape, op);
        ASSERT_TRUE(e) << s.name;
        EXPECT_TRUE(e->CrossesRanks()) << s.name;
        EXPECT_EQ(r, IsSend(op.kind) ? e->from_rank : e->to_rank) << s.name;
        ++(IsSend(op.kind) ? sends : recvs)[EdgeKey(units, *e)];
      }
    }
    int crossing = 0;
    ForEachEdge(s, [&](const Edge& e) {
      if (!e.CrossesRanks()) return;
      ++crossing;
      EXPECT_EQ(sends[EdgeKey(units, e)], 1) << s.name;
      EXPECT_EQ(recvs[EdgeKey(units, e)], 1) << s.name;
    });
    EXPECT_EQ(sends.size(), static_cast<size_t>(crossing)) << s.name;
  }
}

TEST(WeightsTest, UpdateIndexAndVersionRead) {
  Schedule s;
  s.microbatches = 4;
  const Op b = MakeOp(OpKind::kB, 0, 3, 2);
  s.weights = WeightPolicy::kFlush;
  EXPECT_EQ(UpdateIndex(s, b), 2);
  s.weights = WeightPolicy::kTwoBW;
  EXPECT_EQ(UpdateIndex(s, b), 2);
  s.weights = WeightPolicy::kStash;
  EXPECT_EQ(UpdateIndex(s, b), 2 * 4 + 3);
  Op step = MakeOp(OpKind::kStep, 0);
  step.version = 5;
  EXPECT_EQ(VersionRead(step), 4);
  Op f = MakeOp(OpKind::kF, 0);
  f.version = 2;
  EXPECT_EQ(VersionRead(f), 2);
  EXPECT_EQ(VersionRead(MakeOp(OpKind::kSendF, 0)), -1);
}

// Flush schedules update in place (each stage STEPs after its last read of the version); a
// PipeDream stage that still has microbatches in flight on the old version must copy, and the
// last stage (one microbatch at a time) never has to.
TEST(WeightsTest, StepsInPlaceFollowTheLaterReads) {
  auto steps = [](const Schedule& s, int rank) {
    std::vector<bool> flags;
    const auto in_place = StepsInPlace(s);
    for (size_t i = 0; i < s.ops[rank].size(); ++i) {
      if (s.ops[rank][i].kind == OpKind::kStep) flags.push_back(in_place[rank][i]);
    }
    return flags;
  };
  const Schedule flush = Generate("1f1b", test_cases::Params(2, 4, 2));
  EXPECT_EQ(steps(flush, 0), (std::vector<bool>{true, true}));
  EXPECT_EQ(steps(flush, 1), (std::vector<bool>{true, true}));
  const Schedule stash = Generate("pipedream", test_cases::Params(2, 4, 1));
  const std::vector<bool> first = steps(stash, 0), last = steps(stash, 1);
  ASSERT_EQ(first.size(), 4u);
  EXPECT_FALSE(first[0]);  // F1 of stage 0 still reads version 0 when B0's STEP makes version 1
  EXPECT_TRUE(first[3]);   // after the last backward nothing reads the old version
  EXPECT_EQ(last, std::vector<bool>(4, true));
}

}  // namespace
}  // namespace stagecraft::schedules
