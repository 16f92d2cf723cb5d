// What each op reads and which copies it waits for (tensors.h), worked by hand on short lists.
#include "stagecraft/schedules/tensors.h"

#include <vector>

#include <gtest/gtest.h>

namespace stagecraft::schedules {
namespace {

Op Compute(OpKind kind, int mb, int version = 0) { return Op{.kind = kind, .microbatch = mb, .version = version}; }
Op Copy(OpKind kind, Tensor tensor, int mb, int version = 0) {
  return Op{.kind = kind, .microbatch = mb, .version = version, .tensor = tensor};
}

TEST(Tensors, WhatEachKindReads) {
  const TensorReads f = TensorsRead(Compute(OpKind::kF, 2, 1));
  ASSERT_EQ(f.count, 1);
  EXPECT_EQ(f.keys[0], (TensorKey{Tensor::kWeights, 0, 0, 0, 1}));
  const TensorReads b = TensorsRead(Compute(OpKind::kB, 2, 1));
  ASSERT_EQ(b.count, 2);
  EXPECT_EQ(b.keys[0], (TensorKey{Tensor::kActivations, 0, 0, 2, 0}));
  EXPECT_EQ(b.keys[1], (TensorKey{Tensor::kWeights, 0, 0, 0, 1}));
  EXPECT_EQ(TensorsRead(Compute(OpKind::kI, 2)).count, 2);
  const TensorReads w = TensorsRead(Compute(OpKind::kW, 2));  // the W stash is no offloadable tensor
  ASSERT_EQ(w.count, 1);
  EXPECT_EQ(w.keys[0].tensor, Tensor::kWeights);
  const TensorReads step = TensorsRead(Compute(OpKind::kStep, 0, 3));
  ASSERT_EQ(step.count, 2);
  EXPECT_EQ(step.keys[0], (TensorKey{Tensor::kWeights, 0, 0, 0, 2}));  // its base version
  EXPECT_EQ(step.keys[1], (TensorKey{Tensor::kOptimizer, 0, 0, 0, 3}));
  EXPECT_EQ(TensorsRead(Copy(OpKind::kOffload, Tensor::kActivations, 0)).count, 0);
  EXPECT_EQ(TensorsRead(Op{.kind = OpKind::kSendF}).count, 0);
  EXPECT_EQ(DescribeTensor(CopiedTensor(Copy(OpKind::kReload, Tensor::kWeights, 0, 2))),
            "version 2 of stage 0's weights");
}

TEST(Tensors, CopyWaitsOfAnOffloadedGpipeRank) {
  // F0 OFF0 F1 OFF1 F2 RL0 B0 RL1 B1 B2 STEP1
  const std::vector<Op> ops = {
      Compute(OpKind::kF, 0),  Copy(OpKind::kOffload, Tensor::kActivations, 0),
      Compute(OpKind::kF, 1),  Copy(OpKind::kOffload, Tensor::kActivations, 1),
      Compute(OpKind::kF, 2),  Copy(OpKind::kReload, Tensor::kActivations, 0),
      Compute(OpKind::kB, 0),  Copy(OpKind::kReload, Tensor::kActivations, 1),
      Compute(OpKind::kB, 1),  Compute(OpKind::kB, 2),
      Compute(OpKind::kStep, 0, 1)};
  const std::vector<std::vector<int32_t>> waits = CopyWaits(ops);
  ASSERT_EQ(waits.size(), ops.size());
  const std::vector<std::vector<int32_t>> want = {{}, {}, {}, {}, {}, {1}, {5}, {3}, {7}, {}, {}};
  EXPECT_EQ(waits, want);
  // Nothing to wait for in a list without copies.
  EXPECT_TRUE(CopyWaits(std::vector<Op>{Compute(OpKind::kF, 0), Compute(OpKind::kB, 0)}).empty());
}

TEST(Tensors, EveryReaderOfASpilledWeightVersionWaitsForItsReload) {
  // Version 0 offloaded after F0, back before F1; the STEP reads it and the optimizer state,
  // which went to the host and came back too.
  const std::vector<Op> ops = {Compute(OpKind::kF, 0),
                               Copy(OpKind::kOffload, Tensor::kWeights, 0, 0),
                               Copy(OpKind::kOffload, Tensor::kOptimizer, 0, 1),
                               Copy(OpKind::kReload, Tensor::kWeights, 0, 0),
                               Compute(OpKind::kF, 1),
                               Compute(OpKind::kB, 1),
                               Compute(OpKind::kB, 0),
                               Copy(OpKind::kReload, Tensor::kOptimizer, 0, 1),
                               Compute(OpKind::kStep, 0, 1)};
  const std::vector<std::vector<int32_t>> want = {{}, {}, {}, {1}, {3}, {3}, {3}, {2}, {3, 7}};
  EXPECT_EQ(CopyWaits(ops), want);
}

}  // namespace
}  // namespace stagecraft::schedules
