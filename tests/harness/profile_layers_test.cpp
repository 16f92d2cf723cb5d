// harness/src/profile_layers.cpp: the profile a small model gets on the cpu device (sizes worked out by hand),
// the layers' trip through bytes, and the per-field median over ranks.
#include "stagecraft/harness/profile_layers.h"

#include <gtest/gtest.h>

#include <vector>

#include "stagecraft/exec/cpu_device.h"

namespace stagecraft::harness {

using namespace stagecraft::exec;  // the executor's types, throughout
namespace {

// Every layer is filled, whatever the grouping (one group, groups of 2 with a short last one).
TEST(ProfileTest, FillsTheSimulatorsProfile) {
  TrainingConfig config;
  config.model = MlpModel{.layers = 3, .hidden = 8, .residual = false, .seed = 1};
  config.microbatch_size = 4;
  auto device = MakeCpuDevice();
  for (int group : {3, 2, 1}) {
    const sim::Profile p = ProfileLayers(config, *device, 1, 0, group);
    EXPECT_EQ(p.microbatch_size, 4);
    EXPECT_EQ(p.send_bytes, 4 * 8 * 4);  // one layer's output: rows x hidden floats
    ASSERT_EQ(p.layers.size(), 3u);
    for (const sim::LayerProfile& l : p.layers) {
      EXPECT_EQ(l.weight_bytes, (8 * 8 + 8) * 4);  // W and bias, fp32
      EXPECT_EQ(l.grad_bytes, l.weight_bytes);
      EXPECT_GT(l.optimizer_bytes, 0);  // sgd with momentum keeps a velocity
      EXPECT_GT(l.activation_bytes, 0);
      EXPECT_GT(l.forward_ns, 0);
      EXPECT_GT(l.backward_input_ns, 0);
      EXPECT_GT(l.backward_weight_ns, 0);
      EXPECT_GT(l.step_ns, 0);
      EXPECT_GE(l.version_copy_ns, 0);  // an update out of place may cost no more than in place
    }
  }
}

TEST(ProfileTest, LayersSurviveTheirBytes) {
  const std::vector<sim::LayerProfile> layers = {{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, {-1, 0, 1LL << 40, 0, 7, 0, 0, 0, 0, 3}};
  const std::vector<sim::LayerProfile> back = LayersFromBytes(LayersToBytes(layers));
  ASSERT_EQ(back.size(), 2u);
  for (size_t l = 0; l < layers.size(); ++l) {
    for (int64_t sim::LayerProfile::*field : sim::kLayerProfileFields) EXPECT_EQ(back[l].*field, layers[l].*field);
  }
}

// Each field's median is taken on its own: the result need not be any one rank's layer.
TEST(ProfileTest, MedianPerLayerAndField) {
  const std::vector<std::vector<sim::LayerProfile>> per_rank = {
      {{10, 1, 7, 0, 40, 100, 5, 0, 5, 2}, {1, 1, 1, 1, 1, 1, 1, 1, 1, 1}},
      {{30, 3, 9, 0, 60, 100, 5, 0, 5, 2}, {2, 2, 2, 2, 2, 2, 2, 2, 2, 2}},
      {{20, 2, 8, 6, 50, 100, 5, 0, 5, 2}, {3, 3, 3, 3, 3, 3, 3, 3, 3, 30}},
  };
  const std::vector<sim::LayerProfile> median = MedianOverRanks(per_rank);
  ASSERT_EQ(median.size(), 2u);
  const sim::LayerProfile& a = median[0];
  EXPECT_EQ(a.forward_ns, 20);
  EXPECT_EQ(a.backward_input_ns, 2);
  EXPECT_EQ(a.backward_weight_ns, 8);
  EXPECT_EQ(a.step_ns, 0);
  EXPECT_EQ(a.version_copy_ns, 50);
  EXPECT_EQ(a.activation_bytes, 100);
  const sim::LayerProfile& b = median[1];
  EXPECT_EQ(b.forward_ns, 2);
  EXPECT_EQ(b.optimizer_bytes, 2);
  // Of an even count, the mean of the two middle values (base/stats.h, as compare takes it).
  EXPECT_EQ(MedianOverRanks({per_rank[0], per_rank[2]})[0].forward_ns, 15);
}

}  // namespace
}  // namespace stagecraft::harness
