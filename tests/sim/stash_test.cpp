// sim/stash.h: the stash depth before every op, worked by hand from the generators' orders; the
// factor's line, floor and ceiling; the engine running ops for their cost times that factor; the
// mean factors simulate --json reports; and the profile file's stash block, written and read.
#include "stagecraft/sim/stash.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "sim_test_util.h"
#include "stagecraft/schedules/generators.h"
#include "stagecraft/sim/engine.h"
#include "stagecraft/scenario/profile_yaml.h"

namespace stagecraft::sim {
namespace {

using schedules::OpKind;
using schedules::Schedule;
using testing::kUs;

Schedule Unlowered(const std::string& name, int p, int m, int chunks = 1) {
  return schedules::Generate(name, schedules::test_cases::Params(p, m, 1, chunks));
}

// The depths of the compute ops of a rank, in its order.
std::vector<double> ComputeDepths(const Schedule& s, int rank) {
  const std::vector<std::vector<double>> all = StashDepths(s);
  std::vector<double> out;
  for (size_t i = 0; i < s.ops[rank].size(); ++i) {
    if (schedules::IsCompute(s.ops[rank][i].kind)) out.push_back(all[rank][i]);
  }
  return out;
}

// GPipe, 2 ranks x 4: every rank runs F0..F3 at depths 0..3, then B0..B3 at 4, 3, 2, 1 (each B
// still holds its own microbatch). 1F1B's last rank alternates F at 0 and B at 1.
TEST(StashDepths, GpipeAndOneFOneBByHand) {
  const Schedule g = Unlowered("gpipe", 2, 4);
  for (int r = 0; r < 2; ++r) EXPECT_EQ(ComputeDepths(g, r), (std::vector<double>{0, 1, 2, 3, 4, 3, 2, 1})) << r;
  EXPECT_EQ(ComputeDepths(Unlowered("1f1b", 2, 4), 1), (std::vector<double>{0, 1, 0, 1, 0, 1, 0, 1}));
  // rank 0 of 1F1B: F0 F1 B0 F2 B1 F3 B2 B3 (one warm-up F).
  EXPECT_EQ(ComputeDepths(Unlowered("1f1b", 2, 4), 0), (std::vector<double>{0, 1, 2, 1, 2, 1, 2, 1}));
}

// With v stages on a rank each F adds 1/v: interleaved with 2 chunks on 2 ranks, rank 0 starts
// with four chunk-F's, 0, 0.5, 1, 1.5.
TEST(StashDepths, ChunksCountAsShares) {
  const std::vector<double> d = ComputeDepths(Unlowered("interleaved", 2, 4, 2), 0);
  ASSERT_GE(d.size(), 4u);
  EXPECT_EQ((std::vector<double>(d.begin(), d.begin() + 4)), (std::vector<double>{0, 0.5, 1, 1.5}));
}

// 1 + slope x (min(depth, deep) - at) above `at`; 1 at or below it; at most 2; 1 for a STEP.
TEST(StashFactor, ALineAboveItsReferenceUpToTheDeepestMeasured) {
  StashScale s;
  s.deep = 5;
  s.forward = {1, 0.02};
  s.backward = {2, 0.5};
  EXPECT_DOUBLE_EQ(StashFactor(s, OpKind::kF, 0), 1.0);
  EXPECT_DOUBLE_EQ(StashFactor(s, OpKind::kF, 1), 1.0);
  EXPECT_DOUBLE_EQ(StashFactor(s, OpKind::kF, 3), 1.04);
  EXPECT_DOUBLE_EQ(StashFactor(s, OpKind::kF, 9), 1.08);  // held at deep = 5
  EXPECT_DOUBLE_EQ(StashFactor(s, OpKind::kB, 5), 2.0);   // 1 + 0.5 x 3 = 2.5, at most 2
  EXPECT_DOUBLE_EQ(StashFactor(s, OpKind::kI, 5), 1.0);   // no slope
  EXPECT_DOUBLE_EQ(StashFactor(s, OpKind::kStep, 5), 1.0);
}

// One rank of GPipe, 4 microbatches, F 100 us and B 200 us, F's slope 0.1 from depth 0: the F's
// run 100, 110, 120, 130 us, the B's 200 each; the makespan is their sum, 1260 us, where it is
// 1200 without the stash. The reported F is their mean, 115 us.
TEST(StashFactor, TheEngineRunsEachOpForItsCostTimesItsFactor) {
  const Schedule s = testing::Make("gpipe", 1, 4);
  CostTable costs = testing::Uniform(1, 100 * kUs, 100 * kUs, 100 * kUs);
  const schedules::RunRecord plain = Simulate(s, costs, testing::Node(1), SimConfig{});
  EXPECT_EQ(plain.makespan_ns(), 1200 * kUs);
  StashScale stash;
  stash.deep = 10;
  stash.forward = {0, 0.1};
  costs.rank_stash = {stash};
  const schedules::RunRecord run = Simulate(s, costs, testing::Node(1), SimConfig{});
  std::vector<int64_t> f, b;
  for (size_t i = 0; i < s.ops[0].size(); ++i) {
    const int64_t d = run.ranks[0].ops[i].end_ns - run.ranks[0].ops[i].start_ns;
    if (s.ops[0][i].kind == OpKind::kF) f.push_back(d);
    if (s.ops[0][i].kind == OpKind::kB) b.push_back(d);
  }
  EXPECT_EQ(f, (std::vector<int64_t>{100 * kUs, 110 * kUs, 120 * kUs, 130 * kUs}));
  EXPECT_EQ(b, (std::vector<int64_t>(4, 200 * kUs)));
  EXPECT_EQ(run.makespan_ns(), 1260 * kUs);
  const auto mean = MeanStashFactors(s, costs.rank_stash);
  ASSERT_EQ(mean.size(), 1u);
  EXPECT_DOUBLE_EQ(mean[0][0], 1.15);
  EXPECT_DOUBLE_EQ(mean[0][1], 1.0);
  EXPECT_EQ(MeanStashFactors(s, {}), (std::vector<std::array<double, 4>>{{1, 1, 1, 1}}));
}

// The profile's stash block: written with the ranks and read back as it was; a slope out of its
// range is one line naming the key.
TEST(StashProfile, WrittenAndReadBack) {
  Profile p;
  p.microbatch_size = 8;
  p.layers.push_back(LayerProfile{});
  p.layers[0].forward_ns = 1000;
  p.layers[0].backward_input_ns = 1000;
  p.layers[0].backward_weight_ns = 1000;
  RankScale r;
  r.layers = 1;
  StashScale s;
  s.deep = 7.5;
  s.forward = {0.875, 0.0125};
  s.backward = {1.875, 0.03};
  s.backward_weight = {1.5, 0};
  r.stash = s;
  p.ranks.push_back(r);
  const Profile back = ProfileFromYaml(ProfileToYaml(p), "p.yaml");
  ASSERT_EQ(back.ranks.size(), 1u);
  ASSERT_TRUE(back.ranks[0].stash.has_value());
  EXPECT_EQ(*back.ranks[0].stash, s);
  std::string text = ProfileToYaml(p);
  const size_t at = text.find("slope: 0.030000");
  ASSERT_NE(at, std::string::npos);
  text.replace(at, 15, "slope: 3");
  try {
    ProfileFromYaml(text, "p.yaml");
    ADD_FAILURE() << "a slope of 3 was read";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("ranks.0.stash.backward.slope: expected a relative time per microbatch from 0 to 1"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace stagecraft::sim
