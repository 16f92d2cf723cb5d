// schedules/lower.cpp: receives posted ahead (P2p::kAhead) against the lock-step lowering: the
// same SENDs and compute order, the same order of RECVs on every rank (so every channel stays
// FIFO), every RECV before its consumer and no later than in lock step, at most the buffer
// depth outstanding where the order allows, and a hand-worked GPipe rank.
#include "stagecraft/schedules/lower.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "generator_cases.h"
#include "stagecraft/schedules/edges.h"
#include "stagecraft/schedules/validate.h"

namespace stagecraft::schedules {
namespace {

bool IsRecv(const Op& op) { return op.kind == OpKind::kRecvF || op.kind == OpKind::kRecvB; }

std::vector<Op> Only(const std::vector<Op>& ops, bool recvs) {
  std::vector<Op> out;
  std::copy_if(ops.begin(), ops.end(), std::back_inserter(out), [&](const Op& op) { return IsRecv(op) == recvs; });
  return out;
}

// For each RECV, how many non-RECV ops come before it.
std::vector<int> RecvSlots(const std::vector<Op>& ops) {
  std::vector<int> slots;
  int seen = 0;
  for (const Op& op : ops) {
    if (IsRecv(op)) slots.push_back(seen);
    else ++seen;
  }
  return slots;
}

TEST(LowerTest, AheadKeepsOrdersAndHoistsEveryReceive) {
  for (const auto& c : test_cases::SmallGeneratorCases()) {
    const Schedule plain = Generate(c.info->name, c.params);
    const Schedule lockstep = Lower(plain, P2p::kLockstep);
    const Schedule ahead = Lower(plain, P2p::kAhead);
    SCOPED_TRACE(std::string(c.info->name) + " ranks " + std::to_string(c.params.ranks) + " m " +
                 std::to_string(c.params.microbatches));
    EXPECT_TRUE(Validate(ahead).empty());
    for (int r = 0; r < plain.ranks(); ++r) {
      EXPECT_EQ(Only(ahead.ops[r], false), Only(lockstep.ops[r], false));
      EXPECT_EQ(Only(ahead.ops[r], true), Only(lockstep.ops[r], true));
      const std::vector<int> early = RecvSlots(ahead.ops[r]), late = RecvSlots(lockstep.ops[r]);
      for (size_t k = 0; k < early.size(); ++k) EXPECT_LE(early[k], late[k]) << "rank " << r << " recv " << k;
    }
  }
}

// Outstanding receives (posted, consumer not run yet) stay within the depth on 1F1B, where
// every rank consumes its inputs in the order they arrive.
TEST(LowerTest, AheadStaysWithinTheBufferDepth) {
  const Schedule s = Lower(Generate("1f1b", test_cases::Params(4, 16, 2)), P2p::kAhead);
  for (int r = 0; r < s.ranks(); ++r) {
    int outstanding = 0, peak = 0;
    for (const Op& op : s.ops[r]) {
      if (IsRecv(op)) peak = std::max(peak, ++outstanding);
      const auto in = InputEdge(s.shape, op);
      if (IsCompute(op.kind) && in && in->CrossesRanks()) --outstanding;
    }
    EXPECT_EQ(outstanding, 0);
    EXPECT_EQ(peak, kAheadBuffersPerStage) << "rank " << r;
  }
}

// GPipe, 2 ranks, 3 microbatches, rank 1: two receives go up front, and each forward that
// frees a buffer lets the next receive go before the following op.
TEST(LowerTest, AheadGpipeHandWorked) {
  const Schedule s = Lower(Generate("gpipe", test_cases::Params(2, 3)), P2p::kAhead);
  std::vector<std::pair<OpKind, int>> head;
  for (size_t i = 0; i < 6; ++i) head.emplace_back(s.ops[1][i].kind, s.ops[1][i].microbatch);
  const std::vector<std::pair<OpKind, int>> want = {{OpKind::kRecvF, 0}, {OpKind::kRecvF, 1}, {OpKind::kF, 0},
                                                    {OpKind::kRecvF, 2}, {OpKind::kF, 1}, {OpKind::kF, 2}};
  EXPECT_EQ(head, want);
}

TEST(LowerTest, P2pNames) {
  P2p p = P2p::kLockstep;
  EXPECT_TRUE(ParseP2p("ahead", &p));
  EXPECT_EQ(p, P2p::kAhead);
  EXPECT_TRUE(ParseP2p("lockstep", &p));
  EXPECT_EQ(p, P2p::kLockstep);
  EXPECT_FALSE(ParseP2p("eager", &p));
  EXPECT_EQ(P2pName(P2p::kAhead), "ahead");
}

}  // namespace
}  // namespace stagecraft::schedules
