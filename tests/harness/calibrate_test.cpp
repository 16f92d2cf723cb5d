// harness/src/calibrate.cpp's host logic, against oracles worked out by hand: the latency-bandwidth
// least-squares fit, the overlap fraction, the per-rank op scales of a calibration run and the
// runtime's overhead per op. PingPong and WaitAfterCompute need MPI (the CLI tests run them).
#include "stagecraft/harness/calibrate.h"

#include <gtest/gtest.h>

#include <set>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "stagecraft/harness/calibration_runs.h"
#include "stagecraft/harness/predict.h"
#include "stagecraft/sim/collectives.h"
#include "stagecraft/schedules/bubble_split.h"
#include "stagecraft/schedules/generators.h"
#include "stagecraft/schedules/ir.h"
#include "stagecraft/schedules/lower.h"
#include "stagecraft/schedules/run_record.h"
#include "stagecraft/schedules/weights.h"
#include "stagecraft/sim/costs.h"
#include "stagecraft/scenario/profile.h"

namespace stagecraft::harness {

using namespace stagecraft::exec;  // the executor's types, throughout
namespace {

using schedules::Op;
using schedules::OpKind;
using schedules::OpTiming;
using schedules::RunRecord;
using schedules::Schedule;

// The lowered schedule of a generator (receives posted in lock step).
Schedule Lowered(const std::string& name, int ranks, int microbatches, int steps) {
  schedules::GeneratorParams p;
  p.ranks = ranks;
  p.microbatches = microbatches;
  p.steps = steps;
  return schedules::Lower(schedules::Generate(name, p), schedules::P2p::kLockstep);
}

// A record with one unset timing per op of every rank.
RunRecord EmptyRecord(const Schedule& s) {
  RunRecord record;
  record.ranks.resize(s.ranks());
  for (int r = 0; r < s.ranks(); ++r) record.ranks[r].ops.resize(s.ops[r].size());
  return record;
}

// A record of every rank's ops back to back from time 0, op i of rank r lasting d(r, op).
template <typename Fn>
RunRecord BackToBack(const Schedule& s, Fn d) {
  RunRecord record = EmptyRecord(s);
  for (int r = 0; r < s.ranks(); ++r) {
    int64_t t = 0;
    for (size_t i = 0; i < s.ops[r].size(); ++i) {
      const int64_t len = d(r, s.ops[r][i]);
      record.ranks[r].ops[i] = {t, t + len};
      t += len;
    }
  }
  return record;
}

sim::StageCost Cost(int64_t f, int64_t i, int64_t w, int64_t step, int64_t copy) {
  sim::StageCost c;
  c.forward_ns = f;
  c.backward_input_ns = i;
  c.backward_weight_ns = w;
  c.step_ns = step;
  c.version_copy_ns = copy;
  return c;
}

// ---- CalibrationSchedules -------------------------------------------------------------

// Every rank must run every op kind in some calibration run, or its scale for that kind is a
// guess (1) and the simulator times the kind on that rank at its isolated cost. A ZB-H1 fuses
// the first stage's B (nothing waits on its input gradient), so it alone left rank 0's I and W
// unmeasured: on 2 ranks the model then put zb-2p's first-stage I 7-11% below what it measured.
// The kinds each rank runs are read off the schedules the runs build, per update regime.
TEST(CalibrationSchedules, EveryRankRunsEveryPassKindInSomeRun) {
  for (int ranks : {2, 3, 4, 8}) {
    for (int microbatches : {ranks, 2 * ranks + 1}) {
      sim::PipelineSpec pipeline;
      pipeline.ranks = ranks;
      pipeline.microbatches = microbatches;
      pipeline.steps = 2;
      const std::vector<std::string> names = CalibrationSchedules(pipeline);
      std::vector<std::set<OpKind>> kinds(static_cast<size_t>(ranks));
      bool step_after_every_microbatch = false;
      for (const Schedule& s : ScenarioSchedules(pipeline, names)) {
        int steps_on_rank0 = 0;
        for (int r = 0; r < ranks; ++r) {
          for (const Op& op : s.ops[r]) {
            kinds[r].insert(op.kind);
            if (r == 0 && op.kind == OpKind::kStep) ++steps_on_rank0;
          }
        }
        step_after_every_microbatch |= steps_on_rank0 == microbatches * pipeline.steps;
      }
      for (int r = 0; r < ranks; ++r) {
        for (OpKind k : {OpKind::kF, OpKind::kB, OpKind::kI, OpKind::kW, OpKind::kStep}) {
          EXPECT_TRUE(kinds[r].count(k)) << ranks << " ranks x " << microbatches << " microbatches: rank " << r
                                         << " runs no " << schedules::KindName(k);
        }
      }
      EXPECT_TRUE(step_after_every_microbatch) << ranks << " ranks x " << microbatches;
    }
  }
}

// ---- FitLatencyBandwidth ---------------------------------------------------------------

// The line FitLatencyBandwidth fits to `points`, expected to be `latency_ns` and
// `bytes_per_s` (within `tolerance` B/s).
sim::P2pProfile ExpectLine(const std::vector<PingPongPoint>& points, int64_t latency_ns, double bytes_per_s,
                           double tolerance) {
  const sim::P2pProfile fit = FitLatencyBandwidth(points);
  EXPECT_EQ(fit.latency_ns, latency_ns);
  EXPECT_NEAR(fit.bytes_per_s, bytes_per_s, tolerance);
  return fit;
}

// oneway = 5000 ns + bytes / 2e9 B/s = 5000 + bytes / 2 ns:
//   4096 -> 5000 + 2048 = 7048; 65536 -> 5000 + 32768 = 37768; 1048576 -> 5000 + 524288 = 529288.
TEST(FitLatencyBandwidth, ExactPointsGiveTheirLine) {
  const sim::P2pProfile fit = ExpectLine({{4096, 7048}, {65536, 37768}, {1048576, 529288}}, 5000, 2e9, 2e9 * 1e-9);
  EXPECT_DOUBLE_EQ(fit.overlap, 1.0);  // the fit leaves overlap at its default
  // The order of the points does not matter.
  ExpectLine({{1048576, 529288}, {4096, 7048}, {65536, 37768}}, 5000, 2e9, 2e9 * 1e-9);
}

// y = 1000 + x/2 with noise +30, -10, 0, -20 at x = 1000..4000: y = 1530, 1990, 2500, 2980.
//   mean x = 2500, mean y = 9000 / 4 = 2250; dx = -1500, -500, 500, 1500; dy = -720, -260, 250, 730
//   Sxy = 1500·720 + 500·260 + 500·250 + 1500·730 = 1,080,000 + 130,000 + 125,000 + 1,095,000 = 2,430,000
//   Sxx = 2·(1500² + 500²) = 5,000,000 -> slope 0.486 ns/B -> 1e9 / 0.486 = 500e9 / 243 B/s
//   intercept 2250 - 0.486·2500 = 2250 - 1215 = 1035 ns.
TEST(FitLatencyBandwidth, NoisyPointsGiveTheLeastSquaresLine) {
  // 500e9 / 243 = 2,057,613,168.72 B/s
  ExpectLine({{1000, 1530}, {2000, 1990}, {3000, 2500}, {4000, 2980}}, 1035, 500e9 / 243, 1e-3);
}

// Repeated sizes count once each: (1000, 1100) and (1000, 1300) average to 1200 at x = 1000;
// with (3000, 2200): slope (2200 - 1200) / 2000 = 0.5 ns/B (2e9 B/s), intercept 1200 - 500 = 700.
//   Check with the sums: n = 3, Sx = 5000, Sy = 4600, Sxx = 11e6, Sxy = 1.1e6 + 1.3e6 + 6.6e6 = 9e6;
//   det = 33e6 - 25e6 = 8e6; slope = (27e6 - 23e6) / 8e6 = 0.5; intercept (4600 - 2500) / 3 = 700.
TEST(FitLatencyBandwidth, RepeatedSizesAverage) {
  ExpectLine({{1000, 1100}, {1000, 1300}, {3000, 2200}}, 700, 2e9, 2e9 * 1e-9);
}

// (1000, 100), (2000, 1100): slope 1 ns/B (1e9 B/s), intercept 100 - 1000 = -900 -> 0.
TEST(FitLatencyBandwidth, NegativeInterceptClampsToZeroLatency) {
  ExpectLine({{1000, 100}, {2000, 1100}}, 0, 1e9, 1e9 * 1e-9);
}

TEST(FitLatencyBandwidthDeathTest, NeedsTwoDistinctSizes) {
  EXPECT_DEATH(FitLatencyBandwidth({}), "two distinct sizes");
  EXPECT_DEATH(FitLatencyBandwidth({{4096, 7048}}), "two distinct sizes");
  EXPECT_DEATH(FitLatencyBandwidth({{4096, 7048}, {4096, 8000}, {4096, 6000}}), "two distinct sizes");
}

// ---- FitAllReduce ----------------------------------------------------------------------
// time = 2(n-1)·latency + 2(n-1)/n·bytes / bus_bandwidth (the ring form).

// FitAllReduce of `points` on `ranks`, expected to fit, with `latency_ns` and `bus_bytes_per_s`
// (within `tolerance` B/s), for those ranks.
void ExpectRing(const std::vector<AllReducePoint>& points, int ranks, int64_t latency_ns, double bus_bytes_per_s,
                double tolerance) {
  const auto fit = FitAllReduce(points, ranks);
  ASSERT_TRUE(fit.has_value());
  EXPECT_EQ(fit->latency_ns, latency_ns);
  EXPECT_NEAR(fit->bus_bytes_per_s, bus_bytes_per_s, tolerance);
  EXPECT_EQ(fit->ranks, ranks);
}

// n = 2: 2 steps, 2(2-1)/2 = 1 bus byte per byte. latency 10 us, 1 GB/s (1 ns per byte):
//   time = 20000 + bytes: 4096 -> 24096, 65536 -> 85536, 1048576 -> 1068576.
TEST(FitAllReduce, ExactTwoRanks) {
  ExpectRing({{4096, 24096}, {65536, 85536}, {1048576, 1068576}}, 2, 10'000, 1e9, 1e9 * 1e-9);
}

// n = 4: 6 steps, 2(4-1)/4 = 1.5 bus bytes per byte. latency 2 us, 3 GB/s (1/3 ns per bus byte):
//   time = 12000 + 1.5·bytes / 3 = 12000 + bytes / 2: 4000 -> 14000, 40000 -> 32000,
//   400000 -> 212000.
TEST(FitAllReduce, ExactFourRanks) {
  ExpectRing({{4000, 14000}, {40000, 32000}, {400000, 212000}}, 4, 2'000, 3e9, 3e9 * 1e-9);
}

// n = 2 (bus bytes = bytes): 1000 + x/2 with noise +40, -20, 0, -20 at x = 1000..4000:
//   y = 1540, 1980, 2500, 2980; mean x 2500, mean y 2250; dx = -1500, -500, 500, 1500;
//   Sxy = -1500·-710 + -500·-270 + 500·250 + 1500·730 = 1,065,000 + 135,000 + 125,000 + 1,095,000
//       = 2,420,000; Sxx = 5,000,000 -> slope 0.484 ns per bus byte (250e9 / 121 B/s);
//   intercept 2250 - 0.484·2500 = 1040 ns = 2 steps x 520 ns.
TEST(FitAllReduce, NoisyPointsGiveTheLeastSquaresLine) {
  ExpectRing({{1000, 1540}, {2000, 1980}, {3000, 2500}, {4000, 2980}}, 2, 520, 250e9 / 121, 1e-3);
}

// (1000, 100), (2000, 1100) on 2 ranks: the free line is slope 1, intercept -900. Held at latency
// 0, the least squares slope through the origin is Sxy / Sxx = (1000·100 + 2000·1100) / (1000² +
// 2000²) = 2.3e6 / 5e6 = 0.46 ns per byte -> 1e9 / 0.46 B/s.
TEST(FitAllReduce, NegativeLatencyClampsToZeroAndRefitsTheBandwidth) {
  ExpectRing({{1000, 100}, {2000, 1100}}, 2, 0, 1e9 / 0.46, 1e-3);
}

// The calibration inverts the simulator's own statement of the ring (sim::RingPasses): times
// the simulator gives for a link come back as that link, for rings of 3 and 8.
TEST(FitAllReduce, InvertsTheSimulatorsRing) {
  for (const int n : {3, 8}) {
    const sim::RingLink link{4e9, 7'000};
    std::vector<AllReducePoint> points;
    std::vector<std::pair<int64_t, int64_t>> reduces;
    for (const int64_t bytes : {int64_t{1} << 16, int64_t{1} << 20, int64_t{1} << 24}) {
      const int64_t ns = std::llround(sim::AllReduceNs(static_cast<double>(bytes), n, link));
      points.push_back({bytes, ns});
      reduces.emplace_back(bytes, ns);
    }
    const auto fit = FitAllReduce(points, n);
    ASSERT_TRUE(fit.has_value()) << n;
    EXPECT_NEAR(static_cast<double>(fit->latency_ns), 7'000, 1) << n;
    EXPECT_NEAR(fit->bus_bytes_per_s, 4e9, 4e9 * 1e-6) << n;
    const auto seen = InPipelineBusBandwidth(reduces, n, 7'000);
    ASSERT_TRUE(seen.has_value()) << n;
    EXPECT_NEAR(*seen, 4e9, 4e9 * 1e-4) << n;
  }
}

// No fit where it means nothing: one rank (no all-reduce), fewer than two distinct sizes, or a
// time that does not grow with the bytes ((1000, 5000), (2000, 4000): slope -1).
TEST(FitAllReduce, DegenerateGivesNone) {
  EXPECT_FALSE(FitAllReduce({{4096, 24096}, {65536, 85536}}, 1).has_value());
  EXPECT_FALSE(FitAllReduce({}, 2).has_value());
  EXPECT_FALSE(FitAllReduce({{4096, 24096}}, 2).has_value());
  EXPECT_FALSE(FitAllReduce({{4096, 24096}, {4096, 30000}}, 2).has_value());
  EXPECT_FALSE(FitAllReduce({{1000, 5000}, {2000, 4000}}, 2).has_value());
  EXPECT_FALSE(FitAllReduce({{1000, 5000}, {2000, 5000}}, 2).has_value());  // flat: no bandwidth
}

// ---- OverlapFraction -------------------------------------------------------------------

// 1e9 B/s: 100000 bytes take 100000 ns = 100 us of data time (the latency is not part of it).
// ---- InPipelineBusBandwidth -------------------------------------------------------------
// n = 2: 2(n-1)/n = 1 bus byte per byte, 2 steps of latency. 1 MB in 1 ms + 2 x 10 us is 1 GB/s;
// the median of three (1, 2 and 0.5 GB/s) is 1 GB/s; of four, the mean of the middle two.
TEST(InPipelineBusBandwidth, MedianOfWhatTheRunsSaw) {
  const auto one = InPipelineBusBandwidth({{1'000'000, 1'020'000}}, 2, 10'000);
  ASSERT_TRUE(one);
  EXPECT_NEAR(*one, 1e9, 1);
  const auto three = InPipelineBusBandwidth({{1'000'000, 1'020'000}, {1'000'000, 520'000}, {500'000, 1'020'000}}, 2, 10'000);
  ASSERT_TRUE(three);
  EXPECT_NEAR(*three, 1e9, 1);
  const auto four = InPipelineBusBandwidth(
      {{1'000'000, 1'020'000}, {1'000'000, 520'000}, {500'000, 1'020'000}, {4'000'000, 1'020'000}}, 2, 10'000);
  ASSERT_TRUE(four);
  EXPECT_NEAR(*four, 1.5e9, 1);
  // n = 4: 2(n-1)/n = 1.5 bus bytes per byte, 6 steps of latency.
  const auto ring = InPipelineBusBandwidth({{1'000'000, 1'060'000}}, 4, 10'000);
  ASSERT_TRUE(ring);
  EXPECT_NEAR(*ring, 1.5e9, 1);
}

TEST(InPipelineBusBandwidth, NothingPastTheLatencyGivesNone) {
  EXPECT_FALSE(InPipelineBusBandwidth({}, 2, 10'000));
  EXPECT_FALSE(InPipelineBusBandwidth({{1'000'000, 20'000}}, 2, 10'000));
  EXPECT_FALSE(InPipelineBusBandwidth({{0, 1'000'000}}, 2, 10'000));
  EXPECT_FALSE(InPipelineBusBandwidth({{1'000'000, 1'000'000}}, 1, 0));
}

TEST(OverlapFraction, WaitAgainstTheDataTime) {
  sim::P2pProfile fit;
  fit.latency_ns = 7000;
  fit.bytes_per_s = 1e9;
  EXPECT_DOUBLE_EQ(OverlapFraction(fit, 100000, 25000), 0.75);   // 1 - 25/100
  EXPECT_DOUBLE_EQ(OverlapFraction(fit, 100000, 0), 1.0);        // nothing left to wait for
  EXPECT_DOUBLE_EQ(OverlapFraction(fit, 100000, 100000), 0.0);   // all of it after the compute
  EXPECT_DOUBLE_EQ(OverlapFraction(fit, 100000, 150000), 0.0);   // 1 - 1.5 clamps to 0
  EXPECT_DOUBLE_EQ(OverlapFraction(fit, 100000, -5000), 1.0);    // 1 + 0.05 clamps to 1
  fit.bytes_per_s = 4e9;  // 100000 bytes: 25000 ns; a wait of 5000 ns -> 1 - 0.2 = 0.8
  EXPECT_DOUBLE_EQ(OverlapFraction(fit, 100000, 5000), 0.8);
}

TEST(OverlapFraction, NoBandwidthMeansFullOverlap) {
  sim::P2pProfile fit;
  fit.latency_ns = 5000;
  fit.bytes_per_s = 0;
  EXPECT_DOUBLE_EQ(OverlapFraction(fit, 100000, 25000), 1.0);
  EXPECT_DOUBLE_EQ(OverlapFraction(fit, 100000, 0), 1.0);
}

// ---- AddScaleSums and ScaleOf ----------------------------------------------------------

// 1F1B, 2 ranks, 2 microbatches, 2 steps: per rank 4 F, 4 B, 2 STEPs (one per step, in place),
// SEND/RECV in between. Isolated costs: stage 0 F 100, B 150 + 50 = 200, STEP 40 (copy 10);
// stage 1 F 200, B 300 + 100 = 400, STEP 80 (copy 20).
sim::CostTable OneFOneBCosts() {
  sim::CostTable t;
  t.stages = {Cost(100, 150, 50, 40, 10), Cost(200, 300, 100, 80, 20)};
  return t;
}

// Measured durations:
//   step 0 (left out with first_step 1): 10x the isolated cost (F 1000 / 2000, B 2000 / 4000,
//     STEP 400 / 800 on rank 0 / 1);
//   step 1, rank 0: F mb0 100 (1x), F mb1 200 (2x), each B 250, STEP 60;
//   step 1, rank 1: each F 300 (1.5x), B mb0 500, B mb1 300, STEP 40;
//   SEND / RECV: [0, 1e9], which would swamp any sum they entered.
// Ops run back to back per rank, 10 ns apart.
int64_t MeasuredNs(int rank, const Op& op) {
  if (op.step == 0) {
    const int64_t f[] = {1000, 2000}, b[] = {2000, 4000}, step[] = {400, 800};
    switch (op.kind) {
      case OpKind::kF: return f[rank];
      case OpKind::kB: return b[rank];
      case OpKind::kStep: return step[rank];
      default: break;
    }
  } else if (rank == 0) {
    switch (op.kind) {
      case OpKind::kF: return op.microbatch == 0 ? 100 : 200;
      case OpKind::kB: return 250;
      case OpKind::kStep: return 60;
      default: break;
    }
  } else {
    switch (op.kind) {
      case OpKind::kF: return 300;
      case OpKind::kB: return op.microbatch == 0 ? 500 : 300;
      case OpKind::kStep: return 40;
      default: break;
    }
  }
  ADD_FAILURE() << "unexpected op " << static_cast<int>(op.kind) << " on rank " << rank;
  return 0;
}

RunRecord OneFOneBRecord(const Schedule& s) {
  RunRecord record = EmptyRecord(s);
  for (int r = 0; r < s.ranks(); ++r) {
    int64_t t = 0;
    for (size_t i = 0; i < s.ops[r].size(); ++i) {
      const Op& op = s.ops[r][i];
      if (schedules::IsComm(op.kind)) {
        record.ranks[r].ops[i] = {0, 1'000'000'000};
        continue;
      }
      const int64_t d = MeasuredNs(r, op);
      record.ranks[r].ops[i] = {t, t + d};
      t += d + 10;
    }
  }
  return record;
}

TEST(AddScaleSums, OneFOneBPerRankSumsFromFirstStep) {
  const Schedule s = Lowered("1f1b", 2, 2, 2);
  ASSERT_TRUE(s.lowered);
  const RunRecord record = OneFOneBRecord(s);
  std::vector<ScaleSums> sums(2);
  AddScaleSums(s, record, OneFOneBCosts(), 1, &sums);

  // Rank 0, step 1: F 100 + 200 = 300 against 2·100; B 2·250 = 500 against 2·200; STEP 60 / 40.
  EXPECT_DOUBLE_EQ(sums[0].measured[0], 300);
  EXPECT_DOUBLE_EQ(sums[0].isolated[0], 200);
  EXPECT_DOUBLE_EQ(sums[0].measured[1], 500);
  EXPECT_DOUBLE_EQ(sums[0].isolated[1], 400);
  EXPECT_DOUBLE_EQ(sums[0].measured[4], 60);
  EXPECT_DOUBLE_EQ(sums[0].isolated[4], 40);
  // No I or W in 1F1B.
  for (int k : {2, 3}) {
    EXPECT_DOUBLE_EQ(sums[0].measured[k], 0) << k;
    EXPECT_DOUBLE_EQ(sums[0].isolated[k], 0) << k;
    EXPECT_DOUBLE_EQ(sums[1].measured[k], 0) << k;
    EXPECT_DOUBLE_EQ(sums[1].isolated[k], 0) << k;
  }
  // Rank 1, step 1: F 2·300 = 600 / 2·200; B 500 + 300 = 800 / 2·400; STEP 40 / 80.
  EXPECT_DOUBLE_EQ(sums[1].measured[0], 600);
  EXPECT_DOUBLE_EQ(sums[1].isolated[0], 400);
  EXPECT_DOUBLE_EQ(sums[1].measured[1], 800);
  EXPECT_DOUBLE_EQ(sums[1].isolated[1], 800);
  EXPECT_DOUBLE_EQ(sums[1].measured[4], 40);
  EXPECT_DOUBLE_EQ(sums[1].isolated[4], 80);

  // measured / isolated per kind; I and W keep the fallback's.
  const sim::OpScale fallback{0.9, 0.8, 0.7, 0.6, 0.5};
  const sim::OpScale k0 = ScaleOf(sums[0], fallback);
  EXPECT_DOUBLE_EQ(k0.forward, 1.5);   // 300 / 200: summed, not the mean of 1x and 2x
  EXPECT_DOUBLE_EQ(k0.backward, 1.25);  // 500 / 400
  EXPECT_DOUBLE_EQ(k0.backward_input, 0.7);
  EXPECT_DOUBLE_EQ(k0.backward_weight, 0.6);
  EXPECT_DOUBLE_EQ(k0.step, 1.5);  // 60 / 40
  const sim::OpScale k1 = ScaleOf(sums[1], fallback);
  EXPECT_DOUBLE_EQ(k1.forward, 1.5);  // every F on rank 1 lasts 1.5x its cost
  EXPECT_DOUBLE_EQ(k1.backward, 1.0);  // 800 / 800
  EXPECT_DOUBLE_EQ(k1.backward_input, 0.7);
  EXPECT_DOUBLE_EQ(k1.backward_weight, 0.6);
  EXPECT_DOUBLE_EQ(k1.step, 0.5);  // 40 / 80

  // A second run adds to the same sums: the sums double, the scales stay.
  AddScaleSums(s, record, OneFOneBCosts(), 1, &sums);
  EXPECT_DOUBLE_EQ(sums[0].measured[0], 600);
  EXPECT_DOUBLE_EQ(sums[0].isolated[0], 400);
  EXPECT_DOUBLE_EQ(ScaleOf(sums[0], fallback).forward, 1.5);
  EXPECT_DOUBLE_EQ(ScaleOf(sums[1], fallback).step, 0.5);
}

// With first_step 0 the 10x step-0 ops count too:
//   rank 0: F (1000 + 1000 + 100 + 200) / 400 = 2300 / 400 = 5.75; B (2·2000 + 500) / 800 = 5.625;
//           STEP (400 + 60) / 80 = 5.75.
//   rank 1: F (2·2000 + 600) / 800 = 5.75; B (2·4000 + 800) / 1600 = 5.5; STEP (800 + 40) / 160 = 5.25.
TEST(AddScaleSums, FirstStepZeroCountsEveryStep) {
  const Schedule s = Lowered("1f1b", 2, 2, 2);
  std::vector<ScaleSums> sums(2);
  AddScaleSums(s, OneFOneBRecord(s), OneFOneBCosts(), 0, &sums);
  const sim::OpScale k0 = ScaleOf(sums[0], sim::OpScale{});
  EXPECT_DOUBLE_EQ(k0.forward, 5.75);
  EXPECT_DOUBLE_EQ(k0.backward, 5.625);
  EXPECT_DOUBLE_EQ(k0.step, 5.75);
  EXPECT_DOUBLE_EQ(k0.backward_input, 1.0);  // the default fallback
  const sim::OpScale k1 = ScaleOf(sums[1], sim::OpScale{});
  EXPECT_DOUBLE_EQ(k1.forward, 5.75);
  EXPECT_DOUBLE_EQ(k1.backward, 5.5);
  EXPECT_DOUBLE_EQ(k1.step, 5.25);
  EXPECT_DOUBLE_EQ(k1.backward_weight, 1.0);
}

// An op that did not run (start -1, as in a failed rank's record) is left out: without rank 1's
// B of step 1 microbatch 1, its B is 500 / 400 = 1.25.
TEST(AddScaleSums, OpsThatDidNotRunAreLeftOut) {
  const Schedule s = Lowered("1f1b", 2, 2, 2);
  RunRecord record = OneFOneBRecord(s);
  bool found = false;
  for (size_t i = 0; i < s.ops[1].size(); ++i) {
    const Op& op = s.ops[1][i];
    if (op.kind == OpKind::kB && op.step == 1 && op.microbatch == 1) {
      record.ranks[1].ops[i] = OpTiming{};
      found = true;
    }
  }
  ASSERT_TRUE(found);
  std::vector<ScaleSums> sums(2);
  AddScaleSums(s, record, OneFOneBCosts(), 1, &sums);
  EXPECT_DOUBLE_EQ(sums[1].measured[1], 500);
  EXPECT_DOUBLE_EQ(sums[1].isolated[1], 400);
  EXPECT_DOUBLE_EQ(ScaleOf(sums[1], sim::OpScale{}).backward, 1.25);
}

// ZB-H1, 2 ranks, 2 microbatches: the first stage runs fused B's (nothing waits on its input
// gradient), the last splits them into I and W. Every B lasts 1.5x its cost (stage 0: 150 + 50
// = 200 -> 300), every I 2x and every W 3x (stage 1: I 300, W 100), F 1x. So rank 0 gets B only
// (I and W keep the fallback), rank 1 I and W only (B keeps it):
//   rank 0: B 2·300 = 600 against 2·200 = 400 -> 1.5;
//   rank 1: I 2·600 = 1200 against 2·300 = 600 -> 2; W 2·300 = 600 against 2·100 = 200 -> 3.
TEST(AddScaleSums, SplitBackwardFillsInputAndWeightKinds) {
  const Schedule s = Lowered("zb-h1", 2, 2, 1);
  RunRecord record = EmptyRecord(s);
  const sim::CostTable costs = OneFOneBCosts();
  int count[2][3] = {};  // per rank: B, I, W
  for (int r = 0; r < 2; ++r) {
    int64_t t = 0;
    for (size_t i = 0; i < s.ops[r].size(); ++i) {
      const Op& op = s.ops[r][i];
      const sim::StageCost& c = costs.stages[op.stage];
      int64_t d = 0;
      if (op.kind == OpKind::kF) d = c.forward_ns;
      if (op.kind == OpKind::kB) d = 3 * (c.backward_input_ns + c.backward_weight_ns) / 2, ++count[r][0];
      if (op.kind == OpKind::kI) d = 2 * c.backward_input_ns, ++count[r][1];
      if (op.kind == OpKind::kW) d = 3 * c.backward_weight_ns, ++count[r][2];
      record.ranks[r].ops[i] = {t, t + d};
      t += d;
    }
  }
  ASSERT_EQ((std::vector<int>{count[0][0], count[0][1], count[0][2]}), (std::vector<int>{2, 0, 0}));
  ASSERT_EQ((std::vector<int>{count[1][0], count[1][1], count[1][2]}), (std::vector<int>{0, 2, 2}));
  std::vector<ScaleSums> sums(2);
  AddScaleSums(s, record, costs, 0, &sums);
  EXPECT_DOUBLE_EQ(sums[0].measured[1], 600);
  EXPECT_DOUBLE_EQ(sums[0].isolated[1], 400);
  EXPECT_DOUBLE_EQ(sums[1].measured[2], 1200);
  EXPECT_DOUBLE_EQ(sums[1].isolated[2], 600);
  EXPECT_DOUBLE_EQ(sums[1].measured[3], 600);
  EXPECT_DOUBLE_EQ(sums[1].isolated[3], 200);
  const sim::OpScale fallback{0.9, 0.8, 0.7, 0.6, 0.5};
  const sim::OpScale k0 = ScaleOf(sums[0], fallback);
  EXPECT_DOUBLE_EQ(k0.forward, 1.0);
  EXPECT_DOUBLE_EQ(k0.backward, 1.5);
  EXPECT_DOUBLE_EQ(k0.backward_input, 0.7);
  EXPECT_DOUBLE_EQ(k0.backward_weight, 0.6);
  const sim::OpScale k1 = ScaleOf(sums[1], fallback);
  EXPECT_DOUBLE_EQ(k1.forward, 1.0);
  EXPECT_DOUBLE_EQ(k1.backward, 0.8);
  EXPECT_DOUBLE_EQ(k1.backward_input, 2.0);
  EXPECT_DOUBLE_EQ(k1.backward_weight, 3.0);
}

// PipeDream, 2 ranks, 2 microbatches, 2 steps: a STEP after every backward, 4 per rank.
// Rank 0 (stage 0) still has a later B reading the version each of its first three STEPs
// updates (v0 by B1 of step 0, v1 by B0 of step 1, v2 by B1 of step 1), so those copy first;
// its last STEP and every STEP of rank 1 (the last stage: its B follows its F directly) update
// in place. Isolated STEP: stage 0 400 (+ copy 100), stage 1 200 (+ copy 50).
//   rank 0: every STEP lasts 500: 2000 measured against 3·500 + 400 = 1900 -> 20/19
//           (ignoring the copy would give 2000 / 1600 = 1.25);
//   rank 1: every STEP lasts 250: 1000 against 4·200 = 800 -> 1.25.
TEST(AddScaleSums, StepThatCannotRunInPlaceComparesWithTheCopy) {
  const Schedule s = Lowered("pipedream", 2, 2, 2);
  const auto in_place = schedules::StepsInPlace(s);
  std::vector<std::vector<bool>> step_in_place(2);
  for (int r = 0; r < 2; ++r) {
    for (size_t i = 0; i < s.ops[r].size(); ++i) {
      if (s.ops[r][i].kind == OpKind::kStep) step_in_place[r].push_back(in_place[r][i]);
    }
  }
  ASSERT_EQ(step_in_place[0], (std::vector<bool>{false, false, false, true}));
  ASSERT_EQ(step_in_place[1], (std::vector<bool>{true, true, true, true}));

  sim::CostTable costs;
  costs.stages = {Cost(100, 150, 50, 400, 100), Cost(100, 100, 100, 200, 50)};
  const RunRecord record = BackToBack(s, [](int r, const Op& op) -> int64_t {
    return op.kind == OpKind::kStep ? (r == 0 ? 500 : 250) : schedules::IsComm(op.kind) ? 0 : 100;
  });
  std::vector<ScaleSums> sums(2);
  AddScaleSums(s, record, costs, 0, &sums);
  EXPECT_DOUBLE_EQ(sums[0].measured[4], 2000);
  EXPECT_DOUBLE_EQ(sums[0].isolated[4], 1900);
  EXPECT_DOUBLE_EQ(sums[1].measured[4], 1000);
  EXPECT_DOUBLE_EQ(sums[1].isolated[4], 800);
  EXPECT_DOUBLE_EQ(ScaleOf(sums[0], sim::OpScale{}).step, 2000.0 / 1900.0);
  EXPECT_DOUBLE_EQ(ScaleOf(sums[1], sim::OpScale{}).step, 1.25);
}

TEST(ScaleOf, KindsWithoutBothSumsKeepTheFallback) {
  ScaleSums sums;
  // F: 300 / 200; B: nothing measured; I: nothing isolated (a 0 ns op); W: 80 / 40; STEP: 10 / 20.
  const double measured[5] = {300, 0, 50, 80, 10};
  const double isolated[5] = {200, 100, 0, 40, 20};
  for (int k = 0; k < 5; ++k) {
    sums.measured[k] = measured[k];
    sums.isolated[k] = isolated[k];
  }
  const sim::OpScale k = ScaleOf(sums, sim::OpScale{0.9, 0.8, 0.7, 0.6, 0.5});
  EXPECT_DOUBLE_EQ(k.forward, 1.5);
  EXPECT_DOUBLE_EQ(k.backward, 0.8);
  EXPECT_DOUBLE_EQ(k.backward_input, 0.7);
  EXPECT_DOUBLE_EQ(k.backward_weight, 2.0);
  EXPECT_DOUBLE_EQ(k.step, 0.5);
  const sim::OpScale empty = ScaleOf(ScaleSums{}, sim::OpScale{});
  EXPECT_DOUBLE_EQ(empty.forward, 1.0);
  EXPECT_DOUBLE_EQ(empty.step, 1.0);
}

// ---- AddStashSums / StashOf -----------------------------------------------------------

// GPipe, 2 ranks x 3 microbatches, one step; every op runs 2x its cost (stage 0: F 100, B 200;
// stage 1: F 200, B 400). Rank 0's F's run at depths 0, 1, 2 and its B's at 3, 2, 1: F sums
// measured 600 / isolated 300, depth x isolated 0 + 100 + 200 = 300; B 1200 / 600 and
// 3·200 + 2·200 + 200 = 1200; the deepest 3. Rank 1 the same at twice the costs.
TEST(AddStashSums, GpipeDepthsWeightedByIsolatedTime) {
  const Schedule s = Lowered("gpipe", 2, 3, 1);
  const sim::CostTable costs = OneFOneBCosts();
  const RunRecord record = BackToBack(s, [&](int, const Op& op) -> int64_t {
    return op.kind == OpKind::kF ? 2 * costs.stages[op.stage].forward_ns
           : op.kind == OpKind::kB ? 2 * costs.stages[op.stage].FullBackwardNs() : 0;
  });
  std::vector<StashSums> sums(2);
  AddStashSums(s, record, costs, 0, &sums);
  EXPECT_DOUBLE_EQ(sums[0].measured[0], 600);
  EXPECT_DOUBLE_EQ(sums[0].isolated[0], 300);
  EXPECT_DOUBLE_EQ(sums[0].depth_isolated[0], 300);
  EXPECT_DOUBLE_EQ(sums[0].measured[1], 1200);
  EXPECT_DOUBLE_EQ(sums[0].isolated[1], 600);
  EXPECT_DOUBLE_EQ(sums[0].depth_isolated[1], 1200);
  EXPECT_DOUBLE_EQ(sums[0].deepest, 3);
  EXPECT_DOUBLE_EQ(sums[1].isolated[0], 600);
  EXPECT_DOUBLE_EQ(sums[1].depth_isolated[1], 2400);
}

// `n` ops of kind `k` whose measured / isolated have mean `mean` and variance `variance`.
void SetRatios(StashSums* sums, size_t k, int64_t n, double mean, double variance) {
  sums->ops[k] = n;
  sums->ratio_sum[k] = static_cast<double>(n) * mean;
  sums->ratio_squares[k] = static_cast<double>(n) * mean * mean + static_cast<double>(n - 1) * variance;
}

// Shallow F: 1.1x at mean depth 1; deep F: 1.32x at mean depth 3.5, deepest 7 -> slope (1.32 /
// 1.1 - 1) / 2.5 = 0.08 at 1. B: depths 2 and 2.2 (under half a microbatch apart) -> slope 0 at
// 2. W faster when deep -> slope 0. I: no shallow ops -> 0 at 0. No deep run -> none.
TEST(StashOf, SlopeBetweenTheShallowAndDeepRunsMeans) {
  StashSums shallow, deep;
  shallow.measured[0] = 1100, shallow.isolated[0] = 1000, shallow.depth_isolated[0] = 1000;
  deep.measured[0] = 1320, deep.isolated[0] = 1000, deep.depth_isolated[0] = 3500;
  shallow.measured[1] = 1000, shallow.isolated[1] = 1000, shallow.depth_isolated[1] = 2000;
  deep.measured[1] = 1500, deep.isolated[1] = 1000, deep.depth_isolated[1] = 2200;
  shallow.measured[3] = 1000, shallow.isolated[3] = 1000, shallow.depth_isolated[3] = 1000;
  deep.measured[3] = 900, deep.isolated[3] = 1000, deep.depth_isolated[3] = 4000;
  deep.measured[2] = 1000, deep.isolated[2] = 1000, deep.depth_isolated[2] = 3000;
  deep.deepest = 7;
  // F's per-op ratios: 10 ops a side around 1.1 and 1.32, standard deviation 0.01: two standard
  // errors of the slope are 2 x sqrt(2 x 0.0001 / 10) / 1.1 / 2.5 = 0.00325, well under 0.08.
  SetRatios(&shallow, 0, 10, 1.1, 0.0001);
  SetRatios(&deep, 0, 10, 1.32, 0.0001);
  const std::optional<sim::StashScale> k = StashOf(shallow, deep);
  ASSERT_TRUE(k.has_value());
  EXPECT_DOUBLE_EQ(k->deep, 7);
  EXPECT_DOUBLE_EQ(k->forward.at, 1);
  EXPECT_NEAR(k->forward.slope, 0.08, 1e-12);
  EXPECT_NEAR(k->forward.noise, 2 * std::sqrt(2 * 0.0001 / 10) / 1.1 / 2.5, 1e-12);
  EXPECT_DOUBLE_EQ(k->backward.at, 2);
  EXPECT_DOUBLE_EQ(k->backward.slope, 0);
  EXPECT_DOUBLE_EQ(k->backward_weight.slope, 0);
  EXPECT_DOUBLE_EQ(k->backward_input.at, 0);
  EXPECT_DOUBLE_EQ(k->backward_input.slope, 0);
  EXPECT_FALSE(StashOf(shallow, StashSums{}).has_value());
}

// The same means with a standard deviation of 0.3 per op: two standard errors of the slope are
// 2 x sqrt(2 x 0.09 / 10) / 1.1 / 2.5 = 0.0976, above the 0.08 measured, so none is applied;
// and with one op a side the spread is unknown and none is applied either.
TEST(StashOf, ASlopeWithinTheRunsNoiseIsNotApplied) {
  StashSums shallow, deep;
  shallow.measured[0] = 1100, shallow.isolated[0] = 1000, shallow.depth_isolated[0] = 1000;
  deep.measured[0] = 1320, deep.isolated[0] = 1000, deep.depth_isolated[0] = 3500;
  deep.deepest = 7;
  SetRatios(&shallow, 0, 10, 1.1, 0.09);
  SetRatios(&deep, 0, 10, 1.32, 0.09);
  std::optional<sim::StashScale> k = StashOf(shallow, deep);
  ASSERT_TRUE(k.has_value());
  EXPECT_NEAR(k->forward.measured_slope, 0.08, 1e-12);
  EXPECT_NEAR(k->forward.noise, 2 * std::sqrt(2 * 0.09 / 10) / 1.1 / 2.5, 1e-12);
  EXPECT_EQ(k->forward.slope, 0);
  SetRatios(&shallow, 0, 1, 1.1, 0);
  SetRatios(&deep, 0, 1, 1.32, 0);
  k = StashOf(shallow, deep);
  EXPECT_NEAR(k->forward.measured_slope, 0.08, 1e-12);
  EXPECT_EQ(k->forward.slope, 0);
}

// ---- OverheadPerOp ---------------------------------------------------------------------

// Sets the timing of the op of `kind` and `microbatch` (step 0) on `rank`.
void Set(const Schedule& s, RunRecord* record, int rank, OpKind kind, int microbatch, int64_t start, int64_t end) {
  for (size_t i = 0; i < s.ops[rank].size(); ++i) {
    const Op& op = s.ops[rank][i];
    if (op.kind == kind && op.microbatch == microbatch && op.step == 0) {
      record->ranks[rank].ops[i] = {start, end};
      return;
    }
  }
  ADD_FAILURE() << "no op " << static_cast<int>(kind) << " mb " << microbatch << " on rank " << rank;
}

// 1F1B, 2 ranks, 2 microbatches, 1 step: 9 ops per rank (4 compute, 4 SEND/RECV, 1 STEP), 18 in
// all. A transfer starts at max(SEND start, RECV post) and arrives at the RECV's end; a gap
// before a compute op is wait up to the transfer's start, transfer up to its arrival, overhead
// after (no cross-rank input: all overhead; the first compute op's gap is idle).
//   rank 0: F0 [0, 100]; F1 [110, 210]        gap 100-110, no input:             overhead 10
//           B0 [540, 740]: SEND_B0 500, RECV_B0 post 215, arrival 520:
//             wait 210-500, transfer 500-520,                                    overhead 20
//           B1 [775, 975]: SEND_B1 730, RECV_B1 post 745, arrival 760:
//             wait 740-745, transfer 745-760,                                    overhead 15
//           STEP [980, 990]                   gap 975-980, no input:             overhead  5
//                                                                                total    50
//   rank 1: F0 [140, 290]                     first compute op: idle 0-140
//           B0 [300, 500]                     its input is F0 on the same rank:  overhead 10
//           F1 [510, 660]: RECV_F1 arrived at 325, before the gap 500-510:       overhead 10
//           B1 [670, 730]                     same rank input:                   overhead 10
//           STEP [737, 750]                   no input:                          overhead  7
//                                                                                total    37
//   (50 + 37) / 18 = 4.83 -> 5 (rounded to nearest).
RunRecord HandBuiltOneFOneB(const Schedule& s) {
  RunRecord record = EmptyRecord(s);
  record.start_ns = 0;
  record.end_ns = 990;
  Set(s, &record, 0, OpKind::kF, 0, 0, 100);
  Set(s, &record, 0, OpKind::kSendF, 0, 100, 130);
  Set(s, &record, 0, OpKind::kF, 1, 110, 210);
  Set(s, &record, 0, OpKind::kSendF, 1, 210, 325);
  Set(s, &record, 0, OpKind::kRecvB, 0, 215, 520);
  Set(s, &record, 0, OpKind::kB, 0, 540, 740);
  Set(s, &record, 0, OpKind::kRecvB, 1, 745, 760);
  Set(s, &record, 0, OpKind::kB, 1, 775, 975);
  Set(s, &record, 0, OpKind::kStep, 0, 980, 990);
  Set(s, &record, 1, OpKind::kRecvF, 0, 0, 130);
  Set(s, &record, 1, OpKind::kF, 0, 140, 290);
  Set(s, &record, 1, OpKind::kRecvF, 1, 295, 325);
  Set(s, &record, 1, OpKind::kB, 0, 300, 500);
  Set(s, &record, 1, OpKind::kSendB, 0, 500, 520);
  Set(s, &record, 1, OpKind::kF, 1, 510, 660);
  Set(s, &record, 1, OpKind::kB, 1, 670, 730);
  Set(s, &record, 1, OpKind::kSendB, 1, 730, 760);
  Set(s, &record, 1, OpKind::kStep, 0, 737, 750);
  return record;
}

TEST(OverheadPerOp, HandBuiltOneFOneBRun) {
  const Schedule s = Lowered("1f1b", 2, 2, 1);
  ASSERT_EQ(s.ops[0].size(), 9u);
  ASSERT_EQ(s.ops[1].size(), 9u);
  RunRecord record = HandBuiltOneFOneB(s);
  for (int r = 0; r < 2; ++r) {
    for (const OpTiming& t : record.ranks[r].ops) ASSERT_GE(t.start_ns, 0) << "every op has a hand-set timing";
  }
  // The split itself, as worked out above.
  const auto split = schedules::SplitBubbles(s, record, false);
  EXPECT_EQ(split[0].overhead_ns, 50);
  EXPECT_EQ(split[0].wait_ns, 290 + 5);
  EXPECT_EQ(split[0].transfer_ns, 20 + 15);
  EXPECT_EQ(split[1].overhead_ns, 37);
  EXPECT_EQ(split[1].wait_ns, 0);
  EXPECT_EQ(OverheadPerOp(s, record), 5);
  // Each rank over its own 9 ops: 50 / 9 = 5.56 -> 6 and 37 / 9 = 4.11 -> 4.
  EXPECT_EQ(OverheadPerOpByRank(s, record), (std::vector<int64_t>{6, 4}));
  // Rank 0 waited through both of its transfers from their start (wait gap, then transfer gap):
  // 500-520 and 745-760. Rank 1's F0 is its first op (idle, not a wait) and F1's input came early.
  EXPECT_EQ(WaitedTransfers(s, record), (std::vector<int64_t>{20, 15}));
  // B1's input already in flight when rank 0 became free (RECV posted at 700, SEND at 730 < 740):
  // the gap 740-760 is all transfer, whose start the rank did not see: not a sample.
  Set(s, &record, 0, OpKind::kRecvB, 1, 700, 760);
  EXPECT_EQ(WaitedTransfers(s, record), (std::vector<int64_t>{20}));
  Set(s, &record, 0, OpKind::kRecvB, 1, 745, 760);

  // 13 ns more overhead on rank 1 (its STEP 13 ns later): (87 + 13) / 18 = 5.56 -> 6.
  Set(s, &record, 1, OpKind::kStep, 0, 750, 763);
  record.end_ns = 990;
  EXPECT_EQ(OverheadPerOp(s, record), 6);
}

// The same run with both ranks on one device: a gap's time in which the other rank ran a
// compute op is its turn, which the simulator gives again, and leaves the gap.
//   rank 1's compute: F0 140-290, B0 300-500, F1 510-660, B1 670-730, STEP 737-750 (573 ns)
//   rank 0's overhead gaps: 100-110 (free) 10; 520-540 (F1 of rank 1) 0; 760-775 15; 975-980 5: 30
//   rank 0's compute: F0 0-100, F1 110-210, B0 540-740, B1 775-975, STEP 980-990
//   rank 1's overhead gaps: 290-300 10; 500-510 10; 660-670 (B0 of rank 0) 0; 730-737 (B0) 0: 20
//   (30 + 20) / 18 = 2.78 -> 3; by rank 30 / 9 = 3.33 -> 3 and 20 / 9 = 2.22 -> 2.
//   Rank 0's waited transfers 500-520 (rank 1's F1 from 510: 10 left) and 745-760 (rank 1's
//   STEP to 750: 10 left).
TEST(OverheadPerOp, ASharedDeviceLeavesOutTheOtherRanksTurns) {
  const Schedule s = Lowered("1f1b", 2, 2, 1);
  const RunRecord record = HandBuiltOneFOneB(s);
  const HeldByOthers held(s, record, {0, 0});
  EXPECT_FALSE(held.empty());
  EXPECT_EQ(held.In(0, 0, 1000), 150 + 200 + 150 + 60 + 13);
  EXPECT_EQ(held.In(0, 280, 520), 10 + 200 + 10);  // the end of F0, B0, the start of F1
  EXPECT_EQ(held.In(1, 735, 760), 5);              // rank 0's B0 ends at 740
  EXPECT_EQ(held.In(1, 760, 740), 0) << "an empty interval";
  EXPECT_EQ(OverheadPerOp(s, record, {0, 0}), 3);
  EXPECT_EQ(OverheadPerOpByRank(s, record, {0, 0}), (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(WaitedTransfers(s, record, {0, 0}), (std::vector<int64_t>{10, 10}));
  // Devices of their own: nothing held, the figures of the run as it is.
  const HeldByOthers apart(s, record, {0, 1});
  EXPECT_TRUE(apart.empty());
  EXPECT_EQ(apart.In(0, 0, 1000), 0);
  EXPECT_EQ(OverheadPerOp(s, record, {0, 1}), 5);
  EXPECT_EQ(OverheadPerOpByRank(s, record, {}), (std::vector<int64_t>{6, 4}));
  EXPECT_EQ(WaitedTransfers(s, record, {0, 1}), (std::vector<int64_t>{20, 15}));
}

// Ops back to back and inputs all waited for: no overhead at all.
TEST(OverheadPerOp, NoGapsNoOverhead) {
  const Schedule s = Lowered("1f1b", 2, 1, 1);  // rank 0: F SEND_F RECV_B B STEP; rank 1: RECV_F F B SEND_B STEP
  RunRecord record = EmptyRecord(s);
  record.end_ns = 500;
  Set(s, &record, 0, OpKind::kF, 0, 0, 100);
  Set(s, &record, 0, OpKind::kSendF, 0, 100, 150);
  Set(s, &record, 0, OpKind::kRecvB, 0, 100, 400);
  Set(s, &record, 0, OpKind::kB, 0, 400, 500);  // the gap 100-400: wait to 350, transfer to 400
  Set(s, &record, 0, OpKind::kStep, 0, 500, 500);
  Set(s, &record, 1, OpKind::kRecvF, 0, 0, 150);
  Set(s, &record, 1, OpKind::kF, 0, 150, 250);
  Set(s, &record, 1, OpKind::kB, 0, 250, 350);
  Set(s, &record, 1, OpKind::kSendB, 0, 350, 400);
  Set(s, &record, 1, OpKind::kStep, 0, 350, 360);
  EXPECT_EQ(OverheadPerOp(s, record), 0);
  EXPECT_EQ(WaitedTransfers(s, record), (std::vector<int64_t>{50}));  // rank 0's B: 350-400
}

// ---- WithoutSharing -------------------------------------------------------------------

// GPipe, 2 ranks on one device: rank 0's F0 [0, 100], rank 1's F0 [50, 150] and rank 0's F1
// [150, 250]. Alone for 50, together for 50 (half each), alone again for 50: each F0 had 75 of
// the device, and F1 all of its 100. The three add up to the 250 the device was busy (work
// conserved). A transfer and a gap are left as they were.
TEST(WithoutSharing, EachOpKeepsTheDeviceTimeItHad) {
  const Schedule s = Lowered("gpipe", 2, 2, 1);
  RunRecord record = EmptyRecord(s);
  Set(s, &record, 0, OpKind::kF, 0, 0, 100);
  Set(s, &record, 1, OpKind::kF, 0, 50, 150);
  Set(s, &record, 0, OpKind::kF, 1, 150, 250);
  Set(s, &record, 0, OpKind::kSendF, 0, 100, 140);
  const RunRecord alone = WithoutSharing(s, record, {0, 0});
  RunRecord want = record;
  Set(s, &want, 0, OpKind::kF, 0, 0, 75);
  Set(s, &want, 1, OpKind::kF, 0, 50, 125);
  EXPECT_EQ(alone.ranks[0].ops, want.ranks[0].ops);
  EXPECT_EQ(alone.ranks[1].ops, want.ranks[1].ops);
  // Ranks on devices of their own, or no devices named: nothing changes.
  EXPECT_EQ(WithoutSharing(s, record, {0, 1}).ranks[1].ops, record.ranks[1].ops);
  EXPECT_EQ(WithoutSharing(s, record, {}).ranks[0].ops, record.ranks[0].ops);
}

// Three ops at once on one device for 90 ns get 30 each; ops of two devices never mix: rank 2's
// op on device 1 overlapping them keeps its time.
TEST(WithoutSharing, OnlyTheOpsOfOneDeviceShareIt) {
  const Schedule s = Lowered("gpipe", 4, 2, 1);
  RunRecord record = EmptyRecord(s);
  Set(s, &record, 0, OpKind::kF, 0, 0, 90);
  Set(s, &record, 1, OpKind::kF, 0, 0, 90);
  Set(s, &record, 2, OpKind::kF, 0, 0, 90);
  Set(s, &record, 3, OpKind::kF, 0, 0, 90);
  const RunRecord alone = WithoutSharing(s, record, {0, 0, 0, 1});
  for (int r = 0; r < 3; ++r) {
    RunRecord want = record;
    Set(s, &want, r, OpKind::kF, 0, 0, 30);
    EXPECT_EQ(alone.ranks[r].ops, want.ranks[r].ops) << "rank " << r;
  }
  EXPECT_EQ(alone.ranks[3].ops, record.ranks[3].ops);
}

// ---- AddJitter ------------------------------------------------------------------------

// GPipe, 2 ranks, 4 microbatches, 1 step; only rank 0's forwards ran (the rest unset is left
// out): 100, 120, 100, 120 ns against a cost of 100, so ratios 1.0, 1.2, 1.0, 1.2 with mean
// 1.1. Each consecutive pair differs by 0.2 / 1.1 = 0.1818; half its square is 0.016529, three
// pairs: sum 0.049587, CV sqrt(0.016529) = 0.12856. A slow drift (100, 110, 120, 130: ratios
// 1.0..1.3, mean 1.15) gives steps of 0.1 / 1.15 = 0.08696 only: CV 0.06149, far below the
// drift's own spread.
TEST(AddJitter, HalfTheMeanSquaredStepOfTheRatios) {
  const Schedule s = Lowered("gpipe", 2, 4, 1);
  sim::CostTable costs;
  costs.stages = {Cost(100, 50, 50, 10, 0), Cost(100, 50, 50, 10, 0)};
  RunRecord record = EmptyRecord(s);
  int64_t t = 0;
  for (int mb = 0; mb < 4; ++mb) {
    const int64_t d = mb % 2 == 0 ? 100 : 120;
    Set(s, &record, 0, OpKind::kF, mb, t, t + d);
    t += d;
  }
  JitterSums sums;
  AddJitter(s, record, costs, 0, &sums);
  EXPECT_EQ(sums.pairs, 3);
  EXPECT_NEAR(sums.sum, 3 * 0.5 * (0.2 / 1.1) * (0.2 / 1.1), 1e-12);
  EXPECT_NEAR(sums.Cv(), 0.2 / 1.1 / std::sqrt(2.0), 1e-12);
  // Ops of steps before first_step are left out: nothing here is from step 1 on.
  JitterSums none;
  AddJitter(s, record, costs, 1, &none);
  EXPECT_EQ(none.pairs, 0);
  EXPECT_EQ(none.Cv(), 0.0);

  t = 0;
  for (int mb = 0; mb < 4; ++mb) {
    Set(s, &record, 0, OpKind::kF, mb, t, t + 100 + 10 * mb);
    t += 100 + 10 * mb;
  }
  JitterSums drift;
  AddJitter(s, record, costs, 0, &drift);
  EXPECT_NEAR(drift.Cv(), 0.1 / 1.15 / std::sqrt(2.0), 1e-12);
}

}  // namespace
}  // namespace stagecraft::harness
