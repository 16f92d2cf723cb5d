// What a run needs before its clock starts (exec/src/setup.cpp): the dataset's bounds, its
// microbatches cycled by a long run, and the data it holds.
#include <cstdint>
#include <vector>

#include <gtest/gtest.h>

#include "stagecraft/exec/cpu_device.h"
#include "stagecraft/exec/runtime.h"

namespace stagecraft::exec {
namespace {

TrainingConfig Mlp(int hidden, int rows) {
  TrainingConfig c;
  c.model = MlpModel{.layers = 2, .hidden = hidden, .seed = 3};
  c.microbatch_size = rows;
  return c;
}

TEST(DatasetMicrobatches, AShortRunKeepsEveryMicrobatchALongOneSixtyFour) {
  const TrainingConfig c = Mlp(16, 4);
  EXPECT_EQ(DatasetMicrobatches(c, 1), 1);
  EXPECT_EQ(DatasetMicrobatches(c, 24), 24);
  EXPECT_EQ(DatasetMicrobatches(c, 64), 64);
  EXPECT_EQ(DatasetMicrobatches(c, 65), 64);
  EXPECT_EQ(DatasetMicrobatches(c, int64_t{10000} * 8), 64);  // 10,000 steps of 8
}

TEST(DatasetMicrobatches, LargeMicrobatchesAreBoundedByBytes) {
  // hidden 4096 x 2048 rows: 32 MiB of inputs and 32 MiB of mse targets per microbatch; 256 MiB
  // hold 4 of them.
  EXPECT_EQ(DatasetMicrobatches(Mlp(4096, 2048), 100), 4);
  // One microbatch above 256 MiB on its own: the dataset still holds one.
  EXPECT_EQ(DatasetMicrobatches(Mlp(8192, 8192), 100), 1);
}

TEST(MakeDataset, HoldsTheFirstMicrobatchesAndTheRunCyclesThroughThem) {
  const TrainingConfig c = Mlp(8, 3);
  auto device = MakeCpuDevice();
  const Dataset d = MakeDataset(*device, c, 100, true, true);
  ASSERT_EQ(d.microbatches, 64);
  EXPECT_EQ(d.inputs.size(), 64 * 3 * 8);
  EXPECT_EQ(d.targets.size(), 64 * 3 * 8);
  EXPECT_EQ(d.MicrobatchOf(0), 0);
  EXPECT_EQ(d.MicrobatchOf(63), 63);
  EXPECT_EQ(d.MicrobatchOf(64), 0);
  EXPECT_EQ(d.MicrobatchOf(99), 35);
  // Microbatch 37 of the dataset is the model's microbatch 37.
  std::vector<float> x(3 * 8), t(3 * 8), held(3 * 8), held_t(3 * 8);
  MicrobatchInput(c.model, 3, 37, x.data());
  MicrobatchTarget(c.model, 3, 37, t.data());
  device->memory().Download(held.data(), d.inputs.data() + 37 * 24, 24);
  device->memory().Download(held_t.data(), d.targets.data() + 37 * 24, 24);
  EXPECT_EQ(held, x);
  EXPECT_EQ(held_t, t);
}

TEST(MakeDataset, CallsItsBeatBetweenMicrobatches) {
  const TrainingConfig c = Mlp(8, 3);
  auto device = MakeCpuDevice();
  int beats = 0;
  const Dataset d = MakeDataset(*device, c, 10, false, true, [&] { ++beats; });
  EXPECT_EQ(d.microbatches, 10);
  EXPECT_EQ(beats, 10);
}

}  // namespace
}  // namespace stagecraft::exec
