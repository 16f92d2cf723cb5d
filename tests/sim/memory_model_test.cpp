// Tests for sim/src/memory_model.cpp: memory over time for hand-built op sequences on one
// rank (F0 [0,1] F1 [1,2] B0 [2,4] B1 [4,6] and variants), worked out byte by byte.
#include "stagecraft/sim/memory_model.h"

#include <vector>

#include <gtest/gtest.h>

#include "sim_test_util.h"

namespace stagecraft::sim {
namespace {

using schedules::MemorySample;
using schedules::Op;
using schedules::OpKind;
using schedules::RunRecord;
using schedules::Schedule;
using Samples = std::vector<MemorySample>;

Op At(OpKind kind, int microbatch, int version) { return Op{kind, 0, microbatch, 0, version}; }

Schedule OneRank(std::vector<Op> ops) {
  Schedule s;
  s.microbatches = 2;
  s.ops = {std::move(ops)};
  return s;
}

RunRecord Record(int ranks) {
  RunRecord record;
  record.ranks.resize(ranks);
  return record;
}

// Uniform costs of `stages` stages with only these memory sizes.
CostTable Memory(int stages, int64_t activation, int64_t weight, int64_t grad, int64_t optimizer) {
  return testing::WithMemory(testing::Uniform(stages, 0, 0, 0), activation, weight, grad, optimizer);
}

// An op on rank 0 from start_ns to end_ns.
struct Span {
  Op op;
  int64_t start_ns, end_ns;
};

// Each op of `spans` (back to back, in time order) starts, then finishes.
void Play(MemoryModel& memory, const std::vector<Span>& spans) {
  for (const Span& span : spans) {
    memory.ComputeStarted(span.start_ns, 0, span.op);
    memory.ComputeFinished(span.end_ns, 0, span.op);
  }
}

// Weights 100 + gradients 10 + optimizer 1 from the start; 1000 per activation. The STEP at 6
// replaces version 0, whose last reader (B1) ended at 6: one net change of zero.
TEST(MemoryModel, FlushStepOnOneRank) {
  const Op f0 = At(OpKind::kF, 0, 0), f1 = At(OpKind::kF, 1, 0), b0 = At(OpKind::kB, 0, 0), b1 = At(OpKind::kB, 1, 0);
  const Op step = At(OpKind::kStep, 0, 1);
  const Schedule s = OneRank({f0, f1, b0, b1, step});
  const CostTable costs = Memory(1, 1000, 100, 10, 1);
  for (bool record_samples : {true, false}) {
    RunRecord record = Record(1);
    MemoryModel memory(s, costs, record_samples, &record);
    EXPECT_EQ(memory.bytes(0), 111);
    Play(memory, {{f0, 0, 1}, {f1, 1, 2}, {b0, 2, 4}, {b1, 4, 6}, {step, 6, 6}});
    EXPECT_EQ(memory.bytes(0), 111);
    EXPECT_EQ(record.ranks[0].peak_memory_bytes, 2111);
    EXPECT_EQ(record.ranks[0].peak_weight_versions, 1);
    const Samples expected = record_samples ? Samples{{0, 1111}, {1, 2111}, {4, 1111}, {6, 111}} : Samples{};
    EXPECT_EQ(record.ranks[0].memory, expected);
  }
}

// PipeDream's stash: the STEP at 4 makes version 1 while B1 still has to read version 0, so
// two copies (+100) live until B1 ends at 6. Weights 100, activations 10.
TEST(MemoryModel, OldVersionLivesUntilItsLastReader) {
  const Op f0 = At(OpKind::kF, 0, 0), f1 = At(OpKind::kF, 1, 0), b0 = At(OpKind::kB, 0, 0), b1 = At(OpKind::kB, 1, 0);
  const Op step1 = At(OpKind::kStep, 0, 1), step2 = At(OpKind::kStep, 0, 2);
  const Schedule s = OneRank({f0, f1, b0, step1, b1, step2});
  const CostTable costs = Memory(1, 10, 100, 0, 0);
  RunRecord record = Record(1);
  MemoryModel memory(s, costs, true, &record);
  Play(memory, {{f0, 0, 1}, {f1, 1, 2}, {b0, 2, 4}, {step1, 4, 4}, {b1, 4, 6}, {step2, 6, 6}});
  EXPECT_EQ(record.ranks[0].peak_weight_versions, 2);
  EXPECT_EQ(record.ranks[0].peak_memory_bytes, 210);
  EXPECT_EQ(record.ranks[0].memory, (Samples{{0, 110}, {1, 120}, {4, 210}, {6, 100}}));
}

// Zero Bubble's split: after I only the W stash (300 of the 1000) is kept, in one net change,
// so the peak stays 1000 (not 1300); W frees the rest.
TEST(MemoryModel, IKeepsOnlyTheWStashUntilW) {
  const Op f0 = At(OpKind::kF, 0, 0), i0 = At(OpKind::kI, 0, 0), w0 = At(OpKind::kW, 0, 0);
  const Schedule s = OneRank({f0, i0, w0});
  CostTable costs = Memory(1, 1000, 0, 0, 0);
  costs.stages[0].w_stash_bytes = 300;
  RunRecord record = Record(1);
  MemoryModel memory(s, costs, true, &record);
  Play(memory, {{f0, 0, 1}, {i0, 1, 2}, {w0, 2, 3}});
  EXPECT_EQ(record.ranks[0].peak_memory_bytes, 1000);
  EXPECT_EQ(record.ranks[0].memory, (Samples{{0, 1000}, {2, 300}, {3, 0}}));
}

// Recomputing: F keeps the stage input (100); I rebuilds the activations (1000) and holds them
// while it runs, then leaves the W stash (300); B likewise, leaving nothing.
TEST(MemoryModel, RecomputeHoldsTheRebuiltActivationsWhileTheBackwardRuns) {
  const Op f0 = At(OpKind::kF, 0, 0), i0 = At(OpKind::kI, 0, 0), w0 = At(OpKind::kW, 0, 0);
  const Op f1 = At(OpKind::kF, 1, 0), b1 = At(OpKind::kB, 1, 0);
  const Schedule s = OneRank({f0, i0, w0, f1, b1});
  CostTable costs = Memory(1, 100, 0, 0, 0);
  costs.stages[0].w_stash_bytes = 300;
  costs.stages[0].recompute_bytes = 1000;
  RunRecord record = Record(1);
  MemoryModel memory(s, costs, true, &record);
  Play(memory, {{f0, 0, 1}, {i0, 1, 2}, {w0, 2, 3}, {f1, 3, 4}, {b1, 4, 5}});
  EXPECT_EQ(record.ranks[0].peak_memory_bytes, 1100);
  EXPECT_EQ(record.ranks[0].memory, (Samples{{0, 100}, {1, 1100}, {2, 300}, {3, 100}, {4, 1100}, {5, 0}}));
}

// Two ranks of two chunks: rank 0 holds stages 0 and 2, rank 1 stages 1 and 3.
TEST(MemoryModel, WeightsGradientsAndOptimizerStatePerLocalStage) {
  Schedule s;
  s.shape = schedules::Shape{2, 2};
  s.ops = {{}, {}};
  CostTable costs = Memory(4, 0, 0, 10, 1);
  for (int stage = 0; stage < 4; ++stage) costs.stages[stage].weight_bytes = 100 * (stage + 1);
  RunRecord record = Record(2);
  const MemoryModel memory(s, costs, true, &record);
  EXPECT_EQ(memory.bytes(0), (100 + 11) + (300 + 11));
  EXPECT_EQ(memory.bytes(1), (200 + 11) + (400 + 11));
  EXPECT_EQ(record.ranks[1].memory, (Samples{{0, 622}}));
  EXPECT_EQ(record.ranks[1].peak_weight_versions, 1);
}

// Buffers at one time collapse into one sample, but the peak sees the total in between (OOM
// against the peak: run_record_test.cpp).
TEST(MemoryModel, BuffersAndPeak) {
  const Schedule s = OneRank({});
  const CostTable costs = Memory(1, 0, 0, 0, 0);
  RunRecord record = Record(1);
  MemoryModel memory(s, costs, true, &record);
  memory.Allocate(5, 0, 200);
  memory.Allocate(5, 0, 300);
  memory.Free(5, 0, 450);
  memory.Free(9, 0, 50);
  EXPECT_EQ(record.ranks[0].peak_memory_bytes, 500);
  EXPECT_EQ(record.ranks[0].memory, (Samples{{0, 0}, {5, 50}, {9, 0}}));
}

}  // namespace
}  // namespace stagecraft::sim
