// Every generator through the validator and the lowering, and the papers' closed forms for
// each schedule's order, memory and weight versions.
#include "stagecraft/schedules/generators.h"

#include <algorithm>
#include <map>
#include <string>

#include <gtest/gtest.h>

#include "generator_cases.h"
#include "stagecraft/base/error.h"
#include "stagecraft/schedules/analysis.h"
#include "stagecraft/schedules/csv_io.h"
#include "stagecraft/schedules/lower.h"
#include "stagecraft/schedules/validate.h"

namespace stagecraft::schedules {
namespace {

std::string Describe(const std::vector<Diagnostic>& diags) {
  std::string out;
  for (size_t i = 0; i < diags.size() && i < 5; ++i) out += std::string(DiagCodeName(diags[i].code)) + ": " + diags[i].message + "\n";
  return out;
}

using test_cases::Params;

class EveryGenerator : public ::testing::TestWithParam<std::string> {};

// Acceptance: every generator x ranks 1..8 and 16 x microbatches 1..32 x steps 1..3 (where
// the schedule allows it) validates clean and lowers without deadlock.
TEST_P(EveryGenerator, ValidatesAndLowersOverTheWholeSweep) {
  const GeneratorInfo* info = FindGenerator(GetParam());
  ASSERT_NE(info, nullptr);
  int checked = 0;
  for (int ranks : {1, 2, 3, 4, 5, 6, 7, 8, 16}) {
    for (int m = 1; m <= 32; ++m) {
      for (int steps = 1; steps <= 3; ++steps) {
        for (int chunks : info->interleaved ? std::vector<int>{2, 3} : std::vector<int>{1}) {
          const GeneratorParams p = Params(ranks, m, steps, chunks);
          if (!info->check(p).empty()) continue;
          const Schedule s = Generate(GetParam(), p);
          const auto diags = Validate(s);
          ASSERT_TRUE(diags.empty()) << GetParam() << " p=" << ranks << " m=" << m << " steps=" << steps << "\n"
                                     << Describe(diags);
          const Schedule lowered = Lower(s);
          const auto lowered_diags = Validate(lowered);
          ASSERT_TRUE(lowered_diags.empty()) << "lowered " << GetParam() << " p=" << ranks << " m=" << m
                                             << " steps=" << steps << "\n" << Describe(lowered_diags);
          ++checked;
        }
      }
    }
  }
  EXPECT_GT(checked, 200);
}

INSTANTIATE_TEST_SUITE_P(Schedules, EveryGenerator,
                         ::testing::Values("gpipe", "1f1b", "pipedream", "2bw", "interleaved", "interleaved-overlap",
                                           "zb-h1", "zb-h2", "zb-v", "dualpipe-v"),
                         [](const auto& info) {
                           std::string name = info.param;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

// Megatron-LM §2.2.1: GPipe stashes all m microbatches on every rank; 1F1B at most p - r.
TEST(Generators, GpipeHoldsAllMicrobatchesAndOneFOneBAtMostRanksMinusRank) {
  for (int p : {2, 4, 8}) {
    for (int m : {1, 3, 8, 16}) {
      const auto gpipe = Analyze(Generate("gpipe", Params(p, m)));
      const auto ofob = Analyze(Generate("1f1b", Params(p, m)));
      for (int r = 0; r < p; ++r) {
        EXPECT_EQ(gpipe[r].peak_inflight, m) << "p=" << p << " m=" << m << " r=" << r;
        EXPECT_EQ(ofob[r].peak_inflight, std::min(p - r, m)) << "p=" << p << " m=" << m << " r=" << r;
      }
    }
  }
}

// Megatron-LM (SC'21) interleaved schedule: rank r warms up with (p-r-1)*2 + (v-1)*p
// chunk-forwards; for p = 4, v = 2, m = 8 that is [10, 8, 6, 4]. The steady state then
// starts with one more forward before the first backward.
TEST(Generators, InterleavedWarmupMatchesMegatron) {
  const Schedule s = Generate("interleaved", Params(4, 8, 1, 2));
  const std::vector<int> expected = {10, 8, 6, 4};
  for (int r = 0; r < 4; ++r) {
    const auto& ops = s.ops[r];
    const auto first_b = std::find_if(ops.begin(), ops.end(), [](const Op& op) { return op.kind == OpKind::kB; });
    const long forwards_before = std::count_if(ops.begin(), first_b, [](const Op& op) { return op.kind == OpKind::kF; });
    EXPECT_EQ(forwards_before - 1, expected[r]) << "rank " << r;
  }
  // The first backward on rank 0 is of the last chunk (stage 4) for microbatch 0.
  EXPECT_EQ(std::find_if(s.ops[0].begin(), s.ops[0].end(), [](const Op& op) { return op.kind == OpKind::kB; })->stage, 4);
}

// PipeDream (SOSP'19 §3.3): with weight stashing, stage s of n keeps n - s versions in the
// steady state, and each backward reads the version its forward read.
TEST(Generators, PipeDreamStageKeepsRanksMinusStageVersions) {
  for (int n : {2, 3, 4, 8}) {
    const Schedule s = Generate("pipedream", Params(n, 2 * n, 2));
    const auto analysis = Analyze(s);
    for (int stage = 0; stage < n; ++stage) EXPECT_EQ(analysis[stage].peak_weight_versions, n - stage) << "n=" << n;
  }
}

// Vertical sync: every stage runs microbatch k on the version stage 0 used.
TEST(Generators, PipeDreamVerticalSyncUsesStageZeroVersion) {
  GeneratorParams p = Params(4, 8, 2);
  p.vertical_sync = true;
  const Schedule s = Generate("pipedream", p);
  ASSERT_TRUE(Validate(s).empty()) << Describe(Validate(s));
  std::map<std::pair<int, int>, int> stage0;
  for (const Op& op : s.ops[0]) {
    if (op.kind == OpKind::kF) stage0[{op.step, op.microbatch}] = op.version;
  }
  int later_versions = 0;
  for (int r = 1; r < 4; ++r) {
    for (const Op& op : s.ops[r]) {
      if (!IsCompute(op.kind)) continue;
      EXPECT_EQ(op.version, (stage0[{op.step, op.microbatch}])) << ActionString(op, 8);
      later_versions = std::max(later_versions, op.version);
    }
  }
  EXPECT_GT(later_versions, 0);
}

// PipeDream-2BW §3.1: microbatch k (1-indexed, global) reads version max(floor((k-1)/m) - 1, 0)
// and never more than two versions are alive.
TEST(Generators, TwoBWReadsDelayedVersionAndKeepsTwo) {
  for (int p : {2, 4}) {
    for (int m : {4, 6}) {
      const Schedule s = Generate("2bw", Params(p, m, 3));
      for (const auto& rank_ops : s.ops) {
        for (const Op& op : rank_ops) {
          if (!IsCompute(op.kind)) continue;
          const int k = op.step * m + op.microbatch + 1;
          EXPECT_EQ(op.version, std::max((k - 1) / m - 1, 0)) << ActionString(op, m);
        }
      }
      for (const auto& a : Analyze(s)) EXPECT_EQ(a.peak_weight_versions, 2) << "p=" << p << " m=" << m;
    }
  }
}

// Zero Bubble §3.1: ZB-H1 keeps 1F1B's warm-up and memory; ZB-H2 holds 2p-1 on rank 0.
TEST(Generators, ZeroBubbleMemory) {
  for (int p : {2, 4, 8}) {
    const int m = 3 * p;
    const auto h1 = Analyze(Generate("zb-h1", Params(p, m)));
    const auto ofob = Analyze(Generate("1f1b", Params(p, m)));
    const auto h2 = Analyze(Generate("zb-h2", Params(p, m)));
    for (int r = 0; r < p; ++r) EXPECT_EQ(h1[r].peak_inflight, ofob[r].peak_inflight) << "p=" << p << " r=" << r;
    EXPECT_EQ(h2[0].peak_inflight, 2 * p - 1) << "p=" << p;
    for (int r = 0; r < p; ++r) EXPECT_LE(h2[r].peak_inflight, 2 * p - 1);
  }
}

// The papers' unit-time makespans (F = I = W = 1, B = 2, free communication):
// GPipe and 1F1B 3(m + p - 1); ZB-H1 3m + p - 1 (bubble (p-1)(T_F + T_B - T_W) per rank);
// ZB-H2 no idle time between a rank's first forward and its last op; interleaved
// 3mv + 3(p-1) chunk-units (bubble (p-1)(t_f + t_b)/v).
TEST(Generators, UnitTimeMakespansMatchClosedForms) {
  for (int p : {2, 3, 4, 8}) {
    for (int m : {p, 2 * p, 4 * p}) {
      EXPECT_EQ(UnitTimeGrid(Generate("gpipe", Params(p, m))).makespan, 3 * (m + p - 1));
      EXPECT_EQ(UnitTimeGrid(Generate("1f1b", Params(p, m))).makespan, 3 * (m + p - 1));
      EXPECT_EQ(UnitTimeGrid(Generate("zb-h1", Params(p, m))).makespan, 3 * m + p - 1) << "p=" << p << " m=" << m;
      EXPECT_EQ(UnitTimeGrid(Generate("interleaved", Params(p, m, 1, 2))).makespan, 3 * m * 2 + 3 * (p - 1));
      if (m >= 2 * p - 1) {
        const UnitGrid h2 = UnitTimeGrid(Generate("zb-h2", Params(p, m)));
        for (const auto& cells : h2.cells) {
          const int64_t span = cells.back().start + cells.back().duration - cells.front().start;
          EXPECT_EQ(span, 3 * m) << "zb-h2 p=" << p << " m=" << m;
        }
      }
    }
  }
}

// ZB-V against its authors' table (the Zero Bubble repository, T_F = T_B = T_W): activation
// memory 1x 1F1B's and bubble 0, as ZB-H2's. Every rank peaks at 2p chunk activations of half
// a stage each (1F1B's rank 0 holds p stages), the same on every rank; and with m >= 2p no rank
// idles between its first forward and its last op (6m chunk units of work per rank).
TEST(Generators, ZbVHoldsOneFOneBsActivationsAndLeavesNoBubbleOnceFilled) {
  for (int p : {2, 3, 4, 8}) {
    for (int m : {2 * p, 3 * p + 1, 4 * p}) {
      const Schedule zbv = Generate("zb-v", Params(p, m, 1, 2));
      EXPECT_EQ(zbv.shape.placement, Placement::kV);
      const auto ofob = Analyze(Generate("1f1b", Params(p, m)));
      for (const RankAnalysis& a : Analyze(zbv)) EXPECT_EQ(a.peak_inflight, 2 * ofob[0].peak_inflight) << "p=" << p;
      const UnitGrid grid = UnitTimeGrid(zbv);
      for (size_t r = 0; r < grid.cells.size(); ++r) {
        const auto& cells = grid.cells[r];
        const int64_t span = cells.back().start + cells.back().duration - cells.front().start;
        EXPECT_EQ(span, 6 * m) << "zb-v p=" << p << " m=" << m << " rank " << r;
      }
    }
  }
  EXPECT_THROW(Generate("zb-v", Params(4, 8, 1, 3)), InputError);  // two stages per rank, no more
}

// DualPipe-V for p = 2, m = 4, worked by hand from the eight phases in dualpipe_v.cpp (PyTorch's
// ScheduleDualPipeV). Rank 0 holds stages 0 and 3, rank 1 stages 1 and 2. Rank 0: 2(p-r-1) = 2
// F0; one (F0, F1); one (I1, W, F1); m - 2p + r + 1 = 1 round of (F0;B1), (F1;B0); one (B1,
// (F1;B0)); one (B1, B0) switching to I before B0 (even rank); one (W, I0); one W. Rank 1 (the
// last): no F0-only phase; two (F0, F1); two rounds, the first with F0 and B1 apart; two
// (B1, B0) switching to I at the second (odd rank); then its two W.
TEST(Generators, DualPipeVFollowsTheReportsPhasesWorkedByHand) {
  const Schedule s = Generate("dualpipe-v", Params(2, 4, 1, 2));
  EXPECT_EQ(s.shape.placement, Placement::kV);
  EXPECT_EQ(ExportCsv(s, CsvForm::kComputeOnly),
            "0F0,0F1,0F2,3F0,3I0,3W0,3F1,(0F3;3B1)OVERLAP_F_B,(3F2;0B0)OVERLAP_F_B,3B2,(3F3;0B1)OVERLAP_F_B,3B3,"
            "0I2,0W2,0I3,0W3\n"
            "1F0,2F0,1F1,2F1,1F2,2B0,(2F2;1B0)OVERLAP_F_B,(1F3;2B1)OVERLAP_F_B,(2F3;1B1)OVERLAP_F_B,2B2,1B2,"
            "2I3,1I3,2W3,1W3\n");
}

// Megatron-LM's combined 1F1B (get_pp_rank_microbatches with overlap_moe_expert_parallel_comm),
// worked by hand for p = 2, v = 2, m = 4 (rank r holds stages r and r + 2): rank 0 warms up with
// 2(p - r - 1) + (v - 1)p + 1 = 5 chunk-forwards (interleaved's 4 and one more), rank 1 with 3;
// each later F is paired with the B after it, a B of another microbatch; the drain is B alone.
TEST(Generators, InterleavedOverlapIsMegatronsCombinedOneFOneBWorkedByHand) {
  const Schedule s = Generate("interleaved-overlap", Params(2, 4, 1, 2));
  EXPECT_EQ(ExportCsv(s, CsvForm::kComputeOnly),
            "0F0,0F1,2F0,2F1,0F2,(0F3;2B0)OVERLAP_F_B,(2F2;2B1)OVERLAP_F_B,(2F3;0B0)OVERLAP_F_B,0B1,2B2,2B3,0B2,"
            "0B3\n"
            "1F0,1F1,3F0,(3F1;3B0)OVERLAP_F_B,(1F2;3B1)OVERLAP_F_B,(1F3;1B0)OVERLAP_F_B,(3F2;1B1)OVERLAP_F_B,"
            "(3F3;3B2)OVERLAP_F_B,3B3,1B2,1B3\n");
  // The same units as interleaved's, one stashed chunk more where the warm-up grew.
  for (int p : {2, 4}) {
    for (int m : {p, 2 * p, 3 * p + 1}) {
      if (!CheckInterleaved(Params(p, m, 1, 2)).empty()) continue;
      const Schedule plain = Generate("interleaved", Params(p, m, 1, 2));
      const Schedule paired = Generate("interleaved-overlap", Params(p, m, 1, 2));
      const auto plain_a = Analyze(plain), paired_a = Analyze(paired);
      for (int r = 0; r < p; ++r) {
        ASSERT_EQ(plain.ops[r].size(), paired.ops[r].size());
        const int total = 2 * m;
        EXPECT_LE(paired_a[r].peak_inflight, std::min(plain_a[r].peak_inflight + 1, total)) << "p=" << p << " m=" << m;
        EXPECT_GE(paired_a[r].peak_inflight, plain_a[r].peak_inflight) << "p=" << p << " m=" << m;
      }
    }
  }
}

// DeepSeek-V3 report, Table 2 (DualPipe; its V variant alike): a device holds PP + 1 stage
// activations (PP = 2p stages of half a rank each, so one chunk more than 1F1B's p rank-stages)
// and idles (PP/2 - 1)(F&B + B - 3W). On the unit grid (F = W = 1, B = 2) a pair that runs on
// one stream costs F&B = F + B = 3 and sends its outputs when it ends, so each rank idles
// (p - 1)(3 + 2 - 3) = 2(p - 1) units, whatever m.
TEST(Generators, DualPipeVHoldsPPPlusOneActivationsAndIdlesAsTheReportSays) {
  for (int p : {2, 3, 4, 8}) {
    for (int m : {2 * p, 3 * p + 1, 4 * p}) {
      const Schedule s = Generate("dualpipe-v", Params(p, m, 1, 2));
      for (const RankAnalysis& a : Analyze(s)) EXPECT_EQ(a.peak_inflight, 2 * p + 1) << "p=" << p << " m=" << m;
      const UnitGrid grid = UnitTimeGrid(s);
      for (size_t r = 0; r < grid.cells.size(); ++r) {
        int64_t busy = 0;
        for (const GridCell& c : grid.cells[r]) busy += c.duration;
        EXPECT_EQ(busy, 6 * m);
        EXPECT_EQ(grid.makespan - busy, 2 * (p - 1)) << "p=" << p << " m=" << m << " rank " << r;
      }
      for (const P2p p2p : {P2p::kLockstep, P2p::kAhead}) {
        const Schedule lowered = Lower(s, p2p);
        EXPECT_TRUE(Validate(lowered).empty()) << Describe(Validate(lowered));
        // Lowering keeps every pair side by side: nothing between an F and its overlapped partner.
        for (const auto& ops : lowered.ops) {
          for (size_t i = 0; i < ops.size(); ++i) {
            if (ops[i].overlapped) {
              EXPECT_EQ(ops[i - 1].kind, OpKind::kF) << "p=" << p << " m=" << m;
            }
          }
        }
      }
    }
  }
  EXPECT_THROW(Generate("dualpipe-v", Params(4, 7, 1, 2)), InputError);  // m < 2p
  EXPECT_THROW(Generate("dualpipe-v", Params(4, 8, 1, 3)), InputError);  // two stages per rank
}

TEST(Generators, RejectsWhatASchedulesCannotTake) {
  EXPECT_THROW(Generate("1f1b", Params(0, 4)), InputError);
  EXPECT_THROW(Generate("1f1b", Params(4, 0)), InputError);
  EXPECT_THROW(Generate("nope", Params(4, 4)), InputError);
  EXPECT_THROW(Generate("interleaved", Params(4, 9, 1, 2)), InputError);  // 9 microbatches in 2 rounds
  EXPECT_THROW(Generate("interleaved", Params(4, 8, 1, 1)), InputError);  // needs chunks > 1
  EXPECT_THROW(Generate("gpipe", Params(4, 8, 1, 2)), InputError);        // one stage per rank
  EXPECT_THROW(Generate("2bw", Params(8, 4, 3)), InputError);             // m < p - 1 over 3 steps
  // Sizes a scenario accepts (each up to 2^30): 4 x ranks x chunks x microbatches x steps
  // overflowed 64 bits and passed the limit.
  try {
    Generate("gpipe", Params(1 << 30, 1 << 30, 1 << 30));
    ADD_FAILURE() << "no error";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()),
              "gpipe: schedule too large (1073741824 ranks x 1 chunks x 1073741824 microbatches x 1073741824 steps: "
              "over 2^31 ops)");
  }
  try {
    Generate("interleaved", Params(4, 9, 1, 2));
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("divide into max(1, microbatches / ranks) = 2 rounds"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace stagecraft::schedules

namespace stagecraft::schedules {
namespace {

std::vector<std::string> Actions(const Schedule& s, int rank) {
  std::vector<std::string> out;
  for (const Op& op : s.ops[rank]) {
    if (IsCompute(op.kind) && op.kind != OpKind::kStep) out.push_back(ActionString(op, s.microbatches));
  }
  return out;
}

// m not a multiple of p takes PyTorch's flexible interleaving. Worked by hand from its rule for
// p = 2, m = 3, v = 2 (one round of 3; rank 0 warms up with 3 + 2 = 5 chunk-forwards, rank 1
// with 3), and PyTorch's own examples: p = 4 with m = 10 (2 rounds) or 3 (1 round) are taken.
TEST(Generators, InterleavedWithMicrobatchesNotAMultipleOfRanksFollowsPyTorch) {
  const Schedule s = Generate("interleaved", Params(2, 3, 1, 2));
  EXPECT_EQ(Actions(s, 0), (std::vector<std::string>{"0F0", "0F1", "0F2", "2F0", "2F1", "2F2", "2B0", "2B1", "2B2",
                                                      "0B0", "0B1", "0B2"}));
  EXPECT_EQ(Actions(s, 1), (std::vector<std::string>{"1F0", "1F1", "1F2", "3F0", "3B0", "3F1", "3B1", "3F2", "3B2",
                                                      "1B0", "1B1", "1B2"}));
  for (const int m : {10, 3, 5, 7}) {
    const Schedule t = Generate("interleaved", Params(4, m, 2, 2));
    EXPECT_TRUE(Validate(t).empty()) << "m=" << m;
    EXPECT_TRUE(Validate(Lower(t)).empty()) << "m=" << m;
  }
}

}  // namespace
}  // namespace stagecraft::schedules
