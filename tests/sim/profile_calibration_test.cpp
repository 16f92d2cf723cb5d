// The calibration part of profiles (profile_costs.h, profile_yaml.h, profile.h): reading and writing
// input_copy, loss, op_overhead, p2p and the per-rank scales; located errors for bad values; the
// cost tables a calibrated profile gives (each layer scaled by the calibration rank that held
// it, in the schedule's update regime); and the engine under a measured p2p fit and op overhead.
// Every expected number is worked out by hand in the comments.
#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "sim_test_util.h"
#include "stagecraft/schedules/generators.h"
#include "stagecraft/schedules/ir.h"
#include "stagecraft/schedules/lower.h"
#include "stagecraft/sim/compute_streams.h"
#include "stagecraft/sim/cost_models.h"
#include "stagecraft/sim/engine.h"
#include "stagecraft/scenario/profile.h"
#include "stagecraft/sim/profile_costs.h"
#include "stagecraft/scenario/profile_yaml.h"

namespace stagecraft::sim {
namespace {

using schedules::OpKind;
using schedules::Placement;
using schedules::Schedule;
using schedules::Shape;
using testing::ErrorOf;
using testing::Make;
using testing::PosOf;
using testing::Replace;
using testing::ScratchDir;

// Four layers (ns):      forward  backward_input  backward_weight  step  copy
//   layer 0                 1000            2000             4000   800   200
//   layer 1                 3000            1000             1000   400   100
//   layer 2                 2000            3000             2000   600   300
//   layer 3                 4000            2000             1000   200   100
// input_copy 500, loss 700, op_overhead 250, p2p 3 us + bytes / 2 GB/s with overlap 0.25.
// Scales of the two calibration ranks (rank 0 held layers 0-1, rank 1 layers 2-3):
//                 forward  backward  backward_input  backward_weight  step
//   0 per_step        2.0       1.5            1.25             0.75   3.0
//   0 per_mb          4.0       1.5            1.25             0.75   5.0   (others from per_step)
//   1 per_step        0.5     1.125               1                1     1   (omitted: 1)
//   1 per_mb          0.5     1.125             2.0                1     1   (others from per_step)
const char kCalibrated[] = R"(device: test-cpu
microbatch_size: 8
send_bytes: 4KiB
layers:
  - {forward: 1us, backward_input: 2us, backward_weight: 4us, step: 800ns, copy: 200ns, activation_bytes: 1KiB, weight_bytes: 2KiB}
  - {forward: 3us, backward_input: 1us, backward_weight: 1us, step: 400ns, copy: 100ns, activation_bytes: 1KiB, weight_bytes: 2KiB}
  - {forward: 2us, backward_input: 3us, backward_weight: 2us, step: 600ns, copy: 300ns, activation_bytes: 1KiB, weight_bytes: 2KiB}
  - {forward: 4us, backward_input: 2us, backward_weight: 1us, step: 200ns, copy: 100ns, activation_bytes: 1KiB, weight_bytes: 2KiB}
input_copy: 500ns
loss: 700ns
op_overhead: 250ns
p2p: {latency: 3us, bandwidth: 2GB/s, overlap: 0.25}
ranks:
  - per_step: {forward: 2.0, backward: 1.5, backward_input: 1.25, backward_weight: 0.75, step: 3.0}
    per_microbatch: {forward: 4.0, step: 5.0}
  - per_step: {forward: 0.5, backward: 1.125}
    per_microbatch: {backward_input: 2.0}
)";

// The same layers without any calibration.
const char kLayersOnly[] = R"(microbatch_size: 8
send_bytes: 4KiB
layers:
  - {forward: 1us, backward_input: 2us, backward_weight: 4us, activation_bytes: 1KiB, weight_bytes: 2KiB}
  - {forward: 3us, backward_input: 1us, backward_weight: 1us, activation_bytes: 1KiB, weight_bytes: 2KiB}
)";


void ExpectScale(const OpScale& k, double f, double b, double bi, double bw, double step, const std::string& what) {
  SCOPED_TRACE(what);
  EXPECT_DOUBLE_EQ(k.forward, f);
  EXPECT_DOUBLE_EQ(k.backward, b);
  EXPECT_DOUBLE_EQ(k.backward_input, bi);
  EXPECT_DOUBLE_EQ(k.backward_weight, bw);
  EXPECT_DOUBLE_EQ(k.step, step);
}

// `ranks` ranks, 4 microbatches of size 8 (the profile's), even partition.
Scenario Base(int ranks) { return testing::UnitScenario(ranks, "1f1b", 8); }

// ---- reading and writing ---------------------------------------------------------------

TEST(ProfileCalibration, ReadsEveryField) {
  ScratchDir dir;
  const Profile p = LoadProfile(dir.Write("profile.yaml", kCalibrated));
  ASSERT_EQ(p.layers.size(), 4u);
  EXPECT_EQ(p.layers[0].version_copy_ns, 200);  // the layer's `copy`
  EXPECT_EQ(p.layers[2].version_copy_ns, 300);
  EXPECT_EQ(p.input_copy_ns, 500);
  EXPECT_EQ(p.loss_ns, 700);
  EXPECT_EQ(p.op_overhead_ns, 250);
  ASSERT_TRUE(p.p2p.has_value());
  EXPECT_EQ(p.p2p->latency_ns, 3000);
  EXPECT_DOUBLE_EQ(p.p2p->bytes_per_s, 2e9);
  EXPECT_DOUBLE_EQ(p.p2p->overlap, 0.25);
  ASSERT_EQ(p.ranks.size(), 2u);
  ExpectScale(p.ranks[0].per_step, 2.0, 1.5, 1.25, 0.75, 3.0, "rank 0 per_step");
  ExpectScale(p.ranks[0].per_microbatch, 4.0, 1.5, 1.25, 0.75, 5.0, "rank 0 per_microbatch");
  ExpectScale(p.ranks[1].per_step, 0.5, 1.125, 1, 1, 1, "rank 1 per_step");
  ExpectScale(p.ranks[1].per_microbatch, 0.5, 1.125, 2.0, 1, 1, "rank 1 per_microbatch");
}

// Without the calibration keys: all 0 / empty.
TEST(ProfileCalibration, AbsentMeansNone) {
  ScratchDir dir;
  const Profile p = LoadProfile(dir.Write("profile.yaml", kLayersOnly));
  EXPECT_EQ(p.input_copy_ns, 0);
  EXPECT_EQ(p.loss_ns, 0);
  EXPECT_EQ(p.op_overhead_ns, 0);
  EXPECT_FALSE(p.p2p.has_value());
  EXPECT_TRUE(p.ranks.empty());
  // ... and none is written back.
  const std::string yaml = ProfileToYaml(p);
  for (const char* key : {"input_copy", "loss", "op_overhead", "p2p", "ranks", "overlap"}) {
    EXPECT_EQ(yaml.find(key), std::string::npos) << key << " in\n" << yaml;
  }
  const Profile again = LoadProfile(dir.Write("again.yaml", yaml));
  EXPECT_FALSE(again.p2p.has_value());
  EXPECT_TRUE(again.ranks.empty());
}

// A ranks entry may omit either map: per_step keys default to 1, per_microbatch keys to that
// entry's per_step values. p2p's overlap defaults to 1 (a DMA engine: all of it overlaps).
TEST(ProfileCalibration, DefaultsOfRanksAndP2p) {
  ScratchDir dir;
  const std::string text = std::string(kLayersOnly) + R"(p2p: {latency: 0ns, bandwidth: 400Gbps}
ranks:
  - per_microbatch: {step: 2.5}
  - {}
  - per_step: {backward_weight: 0.5}
  - per_step: {forward: 0.25, step: 7}
    per_microbatch: {forward: 8}
)";
  const Profile p = LoadProfile(dir.Write("profile.yaml", text));
  ASSERT_TRUE(p.p2p.has_value());
  EXPECT_EQ(p.p2p->latency_ns, 0);
  EXPECT_DOUBLE_EQ(p.p2p->bytes_per_s, 50e9);  // 400 Gbit/s = 50 GB/s
  EXPECT_DOUBLE_EQ(p.p2p->overlap, 1.0);
  ASSERT_EQ(p.ranks.size(), 4u);
  ExpectScale(p.ranks[0].per_step, 1, 1, 1, 1, 1, "0 per_step");
  ExpectScale(p.ranks[0].per_microbatch, 1, 1, 1, 1, 2.5, "0 per_microbatch");
  ExpectScale(p.ranks[1].per_step, 1, 1, 1, 1, 1, "1 per_step");
  ExpectScale(p.ranks[1].per_microbatch, 1, 1, 1, 1, 1, "1 per_microbatch");
  ExpectScale(p.ranks[2].per_step, 1, 1, 1, 0.5, 1, "2 per_step");
  ExpectScale(p.ranks[2].per_microbatch, 1, 1, 1, 0.5, 1, "2 per_microbatch");
  ExpectScale(p.ranks[3].per_step, 0.25, 1, 1, 1, 7, "3 per_step");
  ExpectScale(p.ranks[3].per_microbatch, 8, 1, 1, 1, 7, "3 per_microbatch");
}

// ProfileToYaml writes durations in exact ns, the bandwidth in whole B/s and scales and overlap
// with 4 decimals: 1.23456 -> 1.2346, 0.98766 -> 0.9877, 0.123456 -> 0.1235,
// 2.5e9 + 0.3 B/s -> 2500000000B/s.
TEST(ProfileCalibration, YamlRoundTrip) {
  ScratchDir dir;
  Profile p = LoadProfile(dir.Write("profile.yaml", kCalibrated));
  p.input_copy_ns = 1'234'567;
  p.ranks[0].per_step.forward = 1.23456;
  p.ranks[1].per_microbatch.step = 0.98766;
  p.p2p->overlap = 0.123456;
  p.p2p->bytes_per_s = 2.5e9 + 0.3;
  const std::string yaml = ProfileToYaml(p);
  EXPECT_NE(yaml.find("input_copy: 1234567ns"), std::string::npos) << yaml;
  EXPECT_NE(yaml.find("op_overhead: 250ns"), std::string::npos) << yaml;
  EXPECT_NE(yaml.find("2500000000B/s"), std::string::npos) << yaml;
  EXPECT_NE(yaml.find("1.2346"), std::string::npos) << yaml;
  EXPECT_EQ(yaml.find("1.23456"), std::string::npos) << yaml;

  const Profile again = LoadProfile(dir.Write("again.yaml", yaml));
  EXPECT_EQ(again.input_copy_ns, 1'234'567);
  EXPECT_EQ(again.loss_ns, 700);
  EXPECT_EQ(again.op_overhead_ns, 250);
  ASSERT_TRUE(again.p2p.has_value());
  EXPECT_EQ(again.p2p->latency_ns, 3000);
  EXPECT_DOUBLE_EQ(again.p2p->bytes_per_s, 2.5e9);
  EXPECT_DOUBLE_EQ(again.p2p->overlap, 0.1235);
  ASSERT_EQ(again.ranks.size(), 2u);
  ExpectScale(again.ranks[0].per_step, 1.2346, 1.5, 1.25, 0.75, 3.0, "rank 0 per_step");
  ExpectScale(again.ranks[0].per_microbatch, 4.0, 1.5, 1.25, 0.75, 5.0, "rank 0 per_microbatch");
  ExpectScale(again.ranks[1].per_step, 0.5, 1.125, 1, 1, 1, "rank 1 per_step");
  ExpectScale(again.ranks[1].per_microbatch, 0.5, 1.125, 2.0, 1, 0.9877, "rank 1 per_microbatch");
  for (size_t l = 0; l < p.layers.size(); ++l) {
    for (int64_t LayerProfile::*field : kLayerProfileFields) {
      EXPECT_EQ(again.layers[l].*field, p.layers[l].*field) << "layer " << l;
    }
  }
  // Written again, it is the same text.
  EXPECT_EQ(ProfileToYaml(again), yaml);
}

// A fit without a bandwidth (the larger messages were not slower) is not written, so a profile
// the tool writes always reads back; the simulator then keeps the topology's links.
// The bandwidth the calibration runs saw is read, written and used for the data of a transfer
// in place of the ping-pong's: 2 GB/s fitted, 1 GB/s in the pipeline.
TEST(ProfileCalibration, InPipelineBandwidthReplacesTheFitsForData) {
  ScratchDir dir;
  const std::string text =
      Replace(kCalibrated, "overlap: 0.25}", "overlap: 0.25, in_pipeline_bandwidth: 1GB/s}");
  const Profile p = LoadProfile(dir.Write("profile.yaml", text));
  ASSERT_TRUE(p.p2p.has_value());
  EXPECT_DOUBLE_EQ(p.p2p->pipeline_bytes_per_s, 1e9);
  EXPECT_DOUBLE_EQ(p.p2p->DataBytesPerS(), 1e9);
  EXPECT_DOUBLE_EQ(LoadProfile(dir.Write("again.yaml", ProfileToYaml(p))).p2p->pipeline_bytes_per_s, 1e9);
  EXPECT_DOUBLE_EQ(LoadProfile(dir.Write("fit.yaml", kCalibrated)).p2p->DataBytesPerS(), 2e9);  // the fit
}

// A rank's own overhead per op: rank 0 has 400 ns, rank 1 none (the profile's 250); the table
// carries them by rank when the calibration ran on as many ranks as the scenario has.
TEST(ProfileCalibration, PerRankOverhead) {
  ScratchDir dir;
  const std::string text = Replace(kCalibrated, "  - per_step: {forward: 2.0", "  - op_overhead: 400ns\n    per_step: {forward: 2.0");
  const Profile p = LoadProfile(dir.Write("profile.yaml", text));
  ASSERT_EQ(p.ranks.size(), 2u);
  EXPECT_EQ(p.ranks[0].op_overhead_ns, 400);
  EXPECT_FALSE(p.ranks[1].op_overhead_ns.has_value());
  EXPECT_EQ(LoadProfile(dir.Write("again.yaml", ProfileToYaml(p))).ranks[0].op_overhead_ns, 400);
  const CostTable t = CostsFromProfile(Base(2), p, Shape{2, 1, Placement::kLoop}, false, true);
  EXPECT_EQ(t.rank_op_overhead_ns, (std::vector<int64_t>{400, 250}));
  EXPECT_EQ(t.OverheadOf(0), 400);
  EXPECT_EQ(t.OverheadOf(1), 250);
  EXPECT_TRUE(CostsFromProfile(Base(2), p, Shape{2, 1, Placement::kLoop}, false, false).rank_op_overhead_ns.empty());
  EXPECT_TRUE(CostsFromProfile(Base(4), p, Shape{4, 1, Placement::kLoop}, false, true).rank_op_overhead_ns.empty());
}

// op_time_cv is read, written (4 decimals) and given to the table when calibrated; a negative
// one is refused where it stands.
TEST(ProfileCalibration, OpTimeCv) {
  ScratchDir dir;
  const std::string text = Replace(kCalibrated, "op_overhead: 250ns", "op_overhead: 250ns\nop_time_cv: 0.0625");
  const Profile p = LoadProfile(dir.Write("profile.yaml", text));
  EXPECT_DOUBLE_EQ(p.op_time_cv, 0.0625);
  EXPECT_DOUBLE_EQ(LoadProfile(dir.Write("again.yaml", ProfileToYaml(p))).op_time_cv, 0.0625);
  EXPECT_DOUBLE_EQ(CostsFromProfile(Base(2), p, Shape{2, 1, Placement::kLoop}, false, true).op_time_cv, 0.0625);
  EXPECT_DOUBLE_EQ(CostsFromProfile(Base(2), p, Shape{2, 1, Placement::kLoop}, false, false).op_time_cv, 0.0);
  const std::string bad = Replace(kCalibrated, "op_overhead: 250ns", "op_overhead: 250ns\nop_time_cv: -0.1");
  EXPECT_EQ(ErrorOf([&] { LoadProfile(dir.Write("bad.yaml", bad)); }),
            dir.Path("bad.yaml") + ":" + PosOf(bad, "-0.1") + ": op_time_cv: expected a coefficient of variation from 0 to 10, got '-0.1'");
}

// The all-reduce fit goes to the cost table beside the p2p fit when calibrated, not otherwise.
TEST(ProfileCalibration, AllReduceFitReachesTheCostTable) {
  ScratchDir dir;
  const std::string text = Replace(kCalibrated, "op_overhead: 250ns", "op_overhead: 250ns\nallreduce: {latency: 7us, bus_bandwidth: 3GB/s, ranks: 2}");
  const Profile p = LoadProfile(dir.Write("profile.yaml", text));
  const CostTable t = CostsFromProfile(Base(2), p, Shape{2, 1, Placement::kLoop}, false, true);
  ASSERT_TRUE(t.allreduce.has_value());
  EXPECT_EQ(t.allreduce->latency_ns, 7000);
  EXPECT_DOUBLE_EQ(t.allreduce->bus_bytes_per_s, 3e9);
  EXPECT_EQ(t.allreduce->ranks, 2);
  EXPECT_FALSE(CostsFromProfile(Base(2), p, Shape{2, 1, Placement::kLoop}, false, false).allreduce.has_value());
  const Profile without = LoadProfile(dir.Write("without.yaml", kCalibrated));
  EXPECT_FALSE(CostsFromProfile(Base(2), without, Shape{2, 1, Placement::kLoop}, false, true).allreduce.has_value());
}

TEST(ProfileCalibration, ZeroBandwidthFitIsNotWritten) {
  ScratchDir dir;
  Profile p = LoadProfile(dir.Write("profile.yaml", kLayersOnly));
  p.p2p = P2pFit{1000, 0, 1};
  const std::string yaml = ProfileToYaml(p);
  EXPECT_EQ(yaml.find("p2p"), std::string::npos) << yaml;
  const std::string path = dir.Write("again.yaml", yaml);
  EXPECT_EQ(ErrorOf([&] { LoadProfile(path); }), "");
  EXPECT_FALSE(LoadProfile(path).p2p.has_value());
}

// Bad values name file:line:col, the key's path and what is wrong.
TEST(ProfileCalibration, BadInputIsLocated) {
  ScratchDir dir;
  const auto error = [&](const std::string& text) {
    const std::string path = dir.Write("bad.yaml", text);
    return ErrorOf([&] { LoadProfile(path); });
  };
  const auto at = [&](const std::string& text, const std::string& needle) {
    return dir.Path("bad.yaml") + ":" + PosOf(text, needle) + ": ";
  };

  std::string bad = Replace(kCalibrated, "overlap: 0.25", "overlap: 1.5");
  EXPECT_EQ(error(bad), at(bad, "1.5}") + "p2p.overlap: expected a fraction from 0 to 1, got '1.5'");

  bad = Replace(kCalibrated, "overlap: 0.25", "overlap: -0.1");
  EXPECT_EQ(error(bad), at(bad, "-0.1}") + "p2p.overlap: expected a fraction from 0 to 1, got '-0.1'");

  bad = Replace(kCalibrated, "forward: 2.0", "forward: -2");
  EXPECT_EQ(error(bad), at(bad, "-2,") + "ranks.0.per_step.forward: expected a number in (0, 1000], got '-2'");

  bad = Replace(kCalibrated, "backward_input: 2.0}", "backward_input: fast}");
  EXPECT_EQ(error(bad),
            at(bad, "fast}") + "ranks.1.per_microbatch.backward_input: expected a number in (0, 1000], got 'fast'");

  bad = Replace(kCalibrated, "step: 3.0}", "step: 0}");  // a scale of 0 is no scale
  EXPECT_EQ(error(bad),
            at(bad, "0}\n    per_microbatch") + "ranks.0.per_step.step: expected a number in (0, 1000], got '0'");

  bad = Replace(kCalibrated, "latency: 3us", "latncy: 3us");
  EXPECT_EQ(error(bad), at(bad, "latncy") +
                            "p2p: unknown key 'latncy' (known: latency, bandwidth, overlap, in_pipeline_bandwidth); did you mean 'latency'?");

  bad = Replace(kCalibrated, "per_microbatch: {forward: 4.0", "per_microbach: {forward: 4.0");
  EXPECT_EQ(error(bad), at(bad, "per_microbach") +
                            "ranks.0: unknown key 'per_microbach' (known: layers, op_overhead, per_step, per_microbatch, stash); "
                            "did you mean 'per_microbatch'?");

  bad = Replace(kCalibrated, "bandwidth: 2GB/s", "bandwidth: 2000000000");
  EXPECT_EQ(error(bad), at(bad, "2000000000") +
                            "p2p.bandwidth: expected a bandwidth like 50GB/s or 400Gbps, "
                            "got '2000000000' (missing unit)");

  bad = Replace(kCalibrated, "latency: 3us, ", "");
  EXPECT_EQ(error(bad), at(bad, "{bandwidth") + "p2p: missing required key 'latency'");

  bad = Replace(kCalibrated, "op_overhead: 250ns", "op_overhead: 250");
  const std::string e = error(bad);
  EXPECT_EQ(e.rfind(at(bad, "250\n") + "op_overhead: expected a duration", 0), 0u) << e;
}

// ---- cost tables -----------------------------------------------------------------------

// kCalibrated loaded (through a scratch directory named after the test: callers must not hold
// their own ScratchDir at the same time).
Profile Calibrated() {
  ScratchDir dir;
  return LoadProfile(dir.Write("profile.yaml", kCalibrated));
}

struct Expected {
  int64_t f, i, w, fused, step, copy;
};

void ExpectStage(const StageCost& c, const Expected& e, const std::string& what) {
  SCOPED_TRACE(what);
  EXPECT_EQ(c.forward_ns, e.f);
  EXPECT_EQ(c.backward_input_ns, e.i);
  EXPECT_EQ(c.backward_weight_ns, e.w);
  EXPECT_EQ(c.fused_backward_ns, e.fused);
  EXPECT_EQ(c.step_ns, e.step);
  EXPECT_EQ(c.version_copy_ns, e.copy);
  EXPECT_EQ(c.send_bytes, 4096);
}

// 2 stages, once-per-step updates: stage 0 = layers 0-1 with rank 0's per_step scales, stage 1 =
// layers 2-3 with rank 1's.
//   stage 0: F (1000 + 3000)·2 + input_copy 500·2 = 9000; I (2000 + 1000)·1.25 = 3750;
//            W (4000 + 1000)·0.75 = 3750; fused B (2000 + 4000 + 1000 + 1000)·1.5 = 12000;
//            STEP (800 + 400)·3 = 3600; copy (200 + 100)·3 = 900.
//   stage 1: F (2000 + 4000)·0.5 + loss 700·0.5 = 3350; I 3000 + 2000 = 5000; W 2000 + 1000 = 3000;
//            fused (3000 + 2000 + 2000 + 1000)·1.125 = 9000; STEP 800; copy 400.
const Expected kTwoStagePerStep[] = {{9000, 3750, 3750, 12000, 3600, 900}, {3350, 5000, 3000, 9000, 800, 400}};

TEST(CalibratedCosts, TwoStagesScaleEachStagesLayerSums) {
  const Scenario sc = Base(2);
  const CostTable t = CostsFromProfile(sc, Calibrated(), Shape{2, 1, Placement::kLoop}, false, true);
  ASSERT_EQ(t.stages.size(), 2u);
  ExpectStage(t.stages[0], kTwoStagePerStep[0], "stage 0");
  ExpectStage(t.stages[1], kTwoStagePerStep[1], "stage 1");
  // Memory is not scaled: 2 layers of 1 KiB activations, 2 KiB weights.
  EXPECT_EQ(t.stages[0].activation_bytes, 2048);
  EXPECT_EQ(t.stages[1].weight_bytes, 4096);
  // The calibration's runtime overhead and transfers come with the table.
  EXPECT_EQ(t.op_overhead_ns, 250);
  ASSERT_TRUE(t.p2p.has_value());
  EXPECT_EQ(t.p2p->latency_ns, 3000);
  EXPECT_DOUBLE_EQ(t.p2p->bytes_per_s, 2e9);
  EXPECT_DOUBLE_EQ(t.p2p->overlap, 0.25);
  EXPECT_EQ(t.p2p_latency_ns, 0);

  // What the streams charge: B the fused time, not I + W = 7500; I and W their own; a STEP that
  // keeps the old version 3600 + 900.
  EXPECT_EQ(OpDurationNs(t.stages[0], OpKind::kB), 12000);
  EXPECT_EQ(OpDurationNs(t.stages[1], OpKind::kB), 9000);
  EXPECT_EQ(OpDurationNs(t.stages[0], OpKind::kI), 3750);
  EXPECT_EQ(OpDurationNs(t.stages[0], OpKind::kW), 3750);
  EXPECT_EQ(OpDurationNs(t.stages[0], OpKind::kF), 9000);
  EXPECT_EQ(OpDurationNs(t.stages[0], OpKind::kStep, true), 3600);
  EXPECT_EQ(OpDurationNs(t.stages[0], OpKind::kStep, false), 4500);
}

// The split the calibration ran with, when recorded, decides which rank's scales a layer gets:
// with rank 0 holding layers 0-2 and rank 1 layer 3, the one-layer stage 2 takes rank 0's
// forward scale: 2000·2.0 = 4000 (the even split would give rank 1's: 2000·0.5 = 1000); the
// last stage (4000 + loss 700)·0.5 = 2350. Counts that do not add up to the layers are
// ignored in favour of the scenario's split.
TEST(CalibratedCosts, RecordedCalibrationSplitPicksTheScales) {
  ScratchDir dir;
  const Scenario sc = Base(2);
  std::string text = Replace(kCalibrated, "  - per_step: {forward: 2.0", "  - layers: 3\n    per_step: {forward: 2.0");
  text = Replace(text, "  - per_step: {forward: 0.5", "  - layers: 1\n    per_step: {forward: 0.5");
  const Profile recorded = LoadProfile(dir.Write("recorded.yaml", text));
  ASSERT_EQ(recorded.ranks.size(), 2u);
  EXPECT_EQ(recorded.ranks[0].layers, 3);
  EXPECT_EQ(recorded.ranks[1].layers, 1);
  CostTable t = CostsFromProfile(sc, recorded, Shape{2, 2, Placement::kLoop}, false, true);
  EXPECT_EQ(t.stages[2].forward_ns, 4000);
  EXPECT_EQ(t.stages[3].forward_ns, 2350);
  const Profile wrong = LoadProfile(dir.Write("wrong.yaml", Replace(text, "layers: 1", "layers: 3")));
  t = CostsFromProfile(sc, wrong, Shape{2, 2, Placement::kLoop}, false, true);
  EXPECT_EQ(t.stages[2].forward_ns, 1000);
  // Written and read again, the counts stay.
  EXPECT_EQ(LoadProfile(dir.Write("again.yaml", ProfileToYaml(recorded))).ranks[0].layers, 3);
}

// Per-microbatch updates: rank 0 forward 4, step 5; rank 1 backward_input 2.
//   stage 0: F 4000·4 + 500·4 = 18000; I, W, fused as per step (3750, 3750, 12000);
//            STEP 1200·5 = 6000; copy 300·5 = 1500.
//   stage 1: F 3350; I 5000·2 = 10000; W 3000; fused 9000; STEP 800; copy 400.
TEST(CalibratedCosts, PerMicrobatchRegime) {
  const CostTable t = CostsFromProfile(Base(2), Calibrated(), Shape{2, 1, Placement::kLoop}, true, true);
  ASSERT_EQ(t.stages.size(), 2u);
  ExpectStage(t.stages[0], {18000, 3750, 3750, 12000, 6000, 1500}, "stage 0");
  ExpectStage(t.stages[1], {3350, 10000, 3000, 9000, 800, 400}, "stage 1");
}

// 4 stages (2 ranks, 2 chunks, loop: stages 0 and 2 on rank 0, 1 and 3 on rank 1), one layer
// each. Every layer keeps the scales of the calibration rank that held it (layers 0-1: rank 0,
// 2-3: rank 1), whatever rank its stage is on now: stage 2 runs on rank 0 with rank 1's.
//   stage 0 (layer 0, rank 0): F 1000·2 + 500·2 = 3000; I 2000·1.25 = 2500; W 4000·0.75 = 3000;
//            fused 6000·1.5 = 9000; STEP 800·3 = 2400; copy 200·3 = 600.
//   stage 1 (layer 1, rank 0): F 3000·2 = 6000; I 1250; W 750; fused 2000·1.5 = 3000; STEP 1200; copy 300.
//   stage 2 (layer 2, rank 1): F 2000·0.5 = 1000 (rank 0's would give 4000); I 3000; W 2000;
//            fused 5000·1.125 = 5625; STEP 600; copy 300.
//   stage 3 (layer 3, rank 1): F 4000·0.5 + 700·0.5 = 2350; I 2000; W 1000; fused 3000·1.125 = 3375;
//            STEP 200; copy 100.
const Expected kFourStagePerStep[] = {{3000, 2500, 3000, 9000, 2400, 600},
                                      {6000, 1250, 750, 3000, 1200, 300},
                                      {1000, 3000, 2000, 5625, 600, 300},
                                      {2350, 2000, 1000, 3375, 200, 100}};

TEST(CalibratedCosts, FourStagesScaleEachLayerByItsCalibrationRank) {
  for (const Placement placement : {Placement::kLoop, Placement::kV}) {
    const CostTable t = CostsFromProfile(Base(2), Calibrated(), Shape{2, 2, placement}, false, true);
    ASSERT_EQ(t.stages.size(), 4u);
    for (int st = 0; st < 4; ++st) ExpectStage(t.stages[st], kFourStagePerStep[st], "stage " + std::to_string(st));
  }
}

// With recompute, I also repeats the forward (at I's scale) and the fused B includes it:
//   stage 0: I (2000 + 1000 + 1000 + 3000)·1.25 = 8750; fused (7000 + 5000)·1.5 = 18000.
//   stage 1: I (3000 + 2000 + 2000 + 4000)·1 = 11000; fused (11000 + 3000)·1.125 = 15750.
TEST(CalibratedCosts, RecomputeScalesTheRepeatedForwardAsBackward) {
  Scenario sc = Base(2);
  sc.pipeline.recompute = Recompute::kFull;
  const CostTable t = CostsFromProfile(sc, Calibrated(), Shape{2, 1, Placement::kLoop}, false, true);
  ExpectStage(t.stages[0], {9000, 8750, 3750, 18000, 3600, 900}, "stage 0");
  ExpectStage(t.stages[1], {3350, 11000, 3000, 15750, 800, 400}, "stage 1");
}

// Uncalibrated (what the calibration itself compares against): the layers alone plus input copy
// and loss, every scale 1, no fused B, no overhead, no p2p.
//   stage 0: F 1000 + 3000 + 500 = 4500; I 3000; W 5000; STEP 1200; copy 300.
//   stage 1: F 2000 + 4000 + 700 = 6700; I 5000; W 3000; STEP 800; copy 400.
TEST(CalibratedCosts, UncalibratedIsTheLayersAlone) {
  for (const bool per_microbatch : {false, true}) {
    const CostTable t = CostsFromProfile(Base(2), Calibrated(), Shape{2, 1, Placement::kLoop}, per_microbatch, false);
    ASSERT_EQ(t.stages.size(), 2u);
    ExpectStage(t.stages[0], {4500, 3000, 5000, 0, 1200, 300}, "stage 0");
    ExpectStage(t.stages[1], {6700, 5000, 3000, 0, 800, 400}, "stage 1");
    EXPECT_EQ(t.op_overhead_ns, 0);
    EXPECT_FALSE(t.p2p.has_value());
    EXPECT_EQ(OpDurationNs(t.stages[0], OpKind::kB), 8000);  // I + W
  }
}

// A profile calibrated on 2 ranks used by a 4-rank scenario: the scales do not apply (each stage
// one layer, unscaled, no fused B); the overhead and the transfers still do.
//   F: 1000 + 500, 3000, 2000, 4000 + 700.
TEST(CalibratedCosts, ScalesForAnotherRankCountAreNotApplied) {
  const CostTable t = CostsFromProfile(Base(4), Calibrated(), Shape{4, 1, Placement::kLoop}, false, true);
  ASSERT_EQ(t.stages.size(), 4u);
  ExpectStage(t.stages[0], {1500, 2000, 4000, 0, 800, 200}, "stage 0");
  ExpectStage(t.stages[1], {3000, 1000, 1000, 0, 400, 100}, "stage 1");
  ExpectStage(t.stages[2], {2000, 3000, 2000, 0, 600, 300}, "stage 2");
  ExpectStage(t.stages[3], {4700, 2000, 1000, 0, 200, 100}, "stage 3");
  EXPECT_EQ(t.op_overhead_ns, 250);
  ASSERT_TRUE(t.p2p.has_value());
  EXPECT_EQ(t.p2p->latency_ns, 3000);
}

// BuildCosts takes the scenario's model.profile: without a schedule it takes loop placement and
// the per-step scales, for 2 and for 4 stages.
TEST(CalibratedCosts, BuildCostsFromTheProfileFile) {
  ScratchDir dir;
  Scenario sc = Base(2);
  testing::ReadProfileInto(&sc, dir.Write("profile.yaml", kCalibrated));
  CostTable t = BuildCosts(sc, 2);
  EXPECT_EQ(t.source, "profile:" + sc.model.profile_path);
  ASSERT_EQ(t.stages.size(), 2u);
  ExpectStage(t.stages[0], kTwoStagePerStep[0], "stage 0");
  ExpectStage(t.stages[1], kTwoStagePerStep[1], "stage 1");
  EXPECT_EQ(t.op_overhead_ns, 250);
  ASSERT_TRUE(t.p2p.has_value());
  EXPECT_DOUBLE_EQ(t.p2p->overlap, 0.25);
  t = BuildCosts(sc, 4);
  ASSERT_EQ(t.stages.size(), 4u);
  for (int st = 0; st < 4; ++st) ExpectStage(t.stages[st], kFourStagePerStep[st], "stage " + std::to_string(st));
}

// ---- update regimes --------------------------------------------------------------------

TEST(UpdatesEveryMicrobatch, OnlyPipeDreamUpdatesMoreThanOncePerStep) {
  EXPECT_TRUE(UpdatesEveryMicrobatch(Make("pipedream", 2, 2, 2)));
  EXPECT_TRUE(UpdatesEveryMicrobatch(Make("pipedream", 2, 4, 1)));
  EXPECT_TRUE(UpdatesEveryMicrobatch(Make("pipedream", 4, 8, 1)));
  // Unlowered: the STEPs are there already.
  EXPECT_TRUE(UpdatesEveryMicrobatch(schedules::Generate("pipedream", schedules::test_cases::Params(2, 2, 1))));
  for (const char* name : {"1f1b", "2bw", "gpipe", "zb-h1"}) {
    EXPECT_FALSE(UpdatesEveryMicrobatch(Make(name, 2, 4, 2))) << name;
    EXPECT_FALSE(UpdatesEveryMicrobatch(Make(name, 4, 8, 1))) << name;
  }
  EXPECT_FALSE(UpdatesEveryMicrobatch(Make("interleaved", 2, 4, 2, 2)));
  // One microbatch per step: one update per step, even for PipeDream.
  EXPECT_FALSE(UpdatesEveryMicrobatch(Make("pipedream", 2, 1, 2)));
}

// BuildCosts with a schedule: PipeDream gets the per-microbatch scales (stage 0 F 18000, stage
// 1 I 10000, stage 0 STEP 6000), the flush schedules and 2BW the per-step ones (9000, 5000, 3600);
// interleaved the 4-stage per-step table.
TEST(UpdatesEveryMicrobatch, BuildCostsPicksTheSchedulesRegime) {
  ScratchDir dir;
  Scenario sc = Base(2);
  testing::ReadProfileInto(&sc, dir.Write("profile.yaml", kCalibrated));
  CostTable t = BuildCosts(sc, Make("pipedream", 2, 4, 1));
  ASSERT_EQ(t.stages.size(), 2u);
  EXPECT_EQ(t.stages[0].forward_ns, 18000);
  EXPECT_EQ(t.stages[1].backward_input_ns, 10000);
  EXPECT_EQ(t.stages[0].step_ns, 6000);
  EXPECT_EQ(t.stages[0].version_copy_ns, 1500);
  EXPECT_EQ(t.op_overhead_ns, 250);
  for (const char* name : {"1f1b", "2bw", "gpipe"}) {
    SCOPED_TRACE(name);
    t = BuildCosts(sc, Make(name, 2, 4, 1));
    ASSERT_EQ(t.stages.size(), 2u);
    ExpectStage(t.stages[0], kTwoStagePerStep[0], "stage 0");
    ExpectStage(t.stages[1], kTwoStagePerStep[1], "stage 1");
  }
  t = BuildCosts(sc, Make("interleaved", 2, 4, 1, 2));
  ASSERT_EQ(t.stages.size(), 4u);
  for (int st = 0; st < 4; ++st) ExpectStage(t.stages[st], kFourStagePerStep[st], "stage " + std::to_string(st));
}

// ---- the engine under a calibrated table -----------------------------------------------

// The timing of rank `rank`'s op of `kind` for microbatch `mb` (step 0).
OpTiming TimingOf(const Schedule& s, const RunRecord& r, int rank, OpKind kind, int mb) {
  for (size_t i = 0; i < s.ops[rank].size(); ++i) {
    if (s.ops[rank][i].kind == kind && s.ops[rank][i].microbatch == mb) return r.ranks[rank].ops[i];
  }
  ADD_FAILURE() << "no op " << static_cast<int>(kind) << " mb " << mb << " on rank " << rank;
  return {};
}

// 1F1B, 2 ranks, 2 microbatches, lock-step receives:
//   rank 0: F0 SEND_F0 F1 SEND_F1 RECV_B0 B0 RECV_B1 B1 STEP
//   rank 1: RECV_F0 F0 RECV_F1 B0 SEND_B0 F1 B1 SEND_B1 STEP
// Costs: stage 0 F 1000, B 1500 + 500; stage 1 F 2000, B 60000 + 40000; STEP 0; 40000 bytes per
// transfer. Measured p2p: L = 2000 ns, 1e9 B/s (1 B/ns), overlap 0.25: the link part of a
// transfer takes L + 0.25·40000 = 12000 ns, then the receiver copies 0.75·40000 = 30000 ns
// before the op. Op overhead X = 300 ns for every op of a list (compute or post), owed until the
// next compute op and paid after its input is in hand. The topology's route latency (777) is
// replaced by the fit. Posts happen when the stream reaches them.
//   t=0      rank 0 F0 [0, 1000]. rank 1 posts RECV_F0 (owes 300), F0 waits.
//   t=1000   rank 0 owes 300 for F0; posts SEND_F0 (owes 600): transfer F0 starts, arrives 13000;
//            F1 [1600, 2600].
//   t=2600   rank 0 owes 300; posts SEND_F1 (rank 1 has not posted its RECV) and RECV_B0 (owes
//            900); B0 waits.
//   t=13000  F0 arrives; rank 1 copies until 43000 (RECV_F0 ends), pays its 300: F0 [43300, 45300].
//   t=45300  rank 1 owes 300; posts RECV_F1 (600): transfer F1 starts, arrives 57300 (during B0);
//            B0 [45900, 145900].
//   t=145900 rank 1 owes 300; posts SEND_B0 (600): transfer B0 starts, arrives 157900; F1's input
//            is there: copied until 175900 (RECV_F1 ends), F1 [176500, 178500].
//   t=157900 rank 0 copies B0's input until 187900 (RECV_B0 ends), pays 900: B0 [188800, 190800].
//   t=178500 rank 1 B1 [178800, 278800].  t=190800 rank 0 owes 300, posts RECV_B1 (600).
//   t=278800 rank 1 owes 300, posts SEND_B1 (600), transfer B1 arrives 290800; STEP at 279400.
//   t=290800 rank 0 copies until 320800, B1 [321400, 323400]; STEP at 323700.
// Two stages (F 1000 / 2000, B 2000 / 100000 ns), 40000-byte messages, 300 ns per op, the
// measured p2p 2000 ns + 1 B/ns with `overlap`, on a topology whose own 777 ns must not count.
RunRecord CalibratedRun(const Schedule& s, double overlap) {
  CostTable costs;
  StageCost c0, c1;
  c0.forward_ns = 1000, c0.backward_input_ns = 1500, c0.backward_weight_ns = 500, c0.send_bytes = 40000;
  c1.forward_ns = 2000, c1.backward_input_ns = 60000, c1.backward_weight_ns = 40000, c1.send_bytes = 40000;
  costs.stages = {c0, c1};
  costs.source = "test";
  costs.op_overhead_ns = 300;
  costs.p2p = P2pFit{2000, 1e9, overlap};
  return Simulate(s, costs, testing::Node(2, 100e9, 777), SimConfig{});
}

TEST(CalibratedEngine, MeasuredTransfersAndOpOverhead) {
  const Schedule s = Make("1f1b", 2, 2);
  const RunRecord r = CalibratedRun(s, 0.25);

  EXPECT_EQ(TimingOf(s, r, 0, OpKind::kF, 0), (OpTiming{0, 1000}));
  EXPECT_EQ(TimingOf(s, r, 0, OpKind::kSendF, 0), (OpTiming{1000, 13000}));
  EXPECT_EQ(TimingOf(s, r, 0, OpKind::kF, 1), (OpTiming{1600, 2600}));
  EXPECT_EQ(TimingOf(s, r, 1, OpKind::kRecvF, 0), (OpTiming{0, 43000}));
  EXPECT_EQ(TimingOf(s, r, 1, OpKind::kF, 0), (OpTiming{43300, 45300}));
  EXPECT_EQ(TimingOf(s, r, 1, OpKind::kB, 0), (OpTiming{45900, 145900}));
  EXPECT_EQ(TimingOf(s, r, 0, OpKind::kSendF, 1), (OpTiming{45300, 57300}));
  EXPECT_EQ(TimingOf(s, r, 1, OpKind::kRecvF, 1), (OpTiming{45300, 175900}));
  EXPECT_EQ(TimingOf(s, r, 1, OpKind::kF, 1), (OpTiming{176500, 178500}));
  EXPECT_EQ(TimingOf(s, r, 1, OpKind::kSendB, 0), (OpTiming{145900, 157900}));
  EXPECT_EQ(TimingOf(s, r, 0, OpKind::kRecvB, 0), (OpTiming{2600, 187900}));
  EXPECT_EQ(TimingOf(s, r, 0, OpKind::kB, 0), (OpTiming{188800, 190800}));
  EXPECT_EQ(TimingOf(s, r, 1, OpKind::kB, 1), (OpTiming{178800, 278800}));
  EXPECT_EQ(TimingOf(s, r, 1, OpKind::kStep, 0), (OpTiming{279400, 279400}));
  EXPECT_EQ(TimingOf(s, r, 0, OpKind::kRecvB, 1), (OpTiming{190800, 320800}));
  EXPECT_EQ(TimingOf(s, r, 0, OpKind::kB, 1), (OpTiming{321400, 323400}));
  EXPECT_EQ(TimingOf(s, r, 0, OpKind::kStep, 0), (OpTiming{323700, 323700}));
  EXPECT_EQ(r.start_ns, 0);
  EXPECT_EQ(r.end_ns, 323700);
  EXPECT_EQ(r.ranks[1].first_f_start_ns, 43300);
}

// The same run with overlap 1 (all of the transfer on the link, nothing left to copy): F0's
// transfer takes 2000 + 40000 = 42000 and arrives at 43000 (RECV_F0 ends), and rank 1's F0
// starts after its 300 of overhead; F1's arrives during B0 (45300 + 42000 = 87300) and F1 starts
// once B0 and the SEND_B0 post are paid for, at 146500 instead of 176500: overlapping hides the
// copy.
TEST(CalibratedEngine, FullOverlapLeavesNothingToCopy) {
  const Schedule s = Make("1f1b", 2, 2);
  const RunRecord r = CalibratedRun(s, 1.0);
  EXPECT_EQ(TimingOf(s, r, 0, OpKind::kSendF, 0), (OpTiming{1000, 43000}));
  EXPECT_EQ(TimingOf(s, r, 1, OpKind::kRecvF, 0), (OpTiming{0, 43000}));
  EXPECT_EQ(TimingOf(s, r, 1, OpKind::kF, 0), (OpTiming{43300, 45300}));
  EXPECT_EQ(TimingOf(s, r, 1, OpKind::kRecvF, 1), (OpTiming{45300, 87300}));
  EXPECT_EQ(TimingOf(s, r, 1, OpKind::kF, 1), (OpTiming{146500, 148500}));
}

}  // namespace
}  // namespace stagecraft::sim
