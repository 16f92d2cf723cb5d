// Tests for schedules/src/budget.cpp: the op estimate against hand-counted small schedules and
// against every generator's lowered output, and the limit's message.
#include "stagecraft/schedules/budget.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>

#include "generator_cases.h"
#include "stagecraft/base/error.h"
#include "stagecraft/schedules/generators.h"
#include "stagecraft/schedules/lower.h"

namespace stagecraft::schedules {
namespace {

using test_cases::Params;  // (ranks, microbatches, steps, chunks)

std::string ErrorOf(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

Schedule Built(std::string_view name, const GeneratorParams& p) { return Lower(Generate(name, p), P2p::kAhead); }

double Estimate(std::string_view name, const GeneratorParams& p) { return EstimateSize(*FindGenerator(name), p).ops; }

// Counted by hand, op by op: each is the schedule's exact count, which the estimate meets for
// the families with one B per unit.
TEST(EstimateSize, HandCountedSchedules) {
  // gpipe, 2 ranks x 3 microbatches: F 6 + B 6 + STEP 2 (one per stage) + 3 microbatches x
  // (SEND_F, RECV_F, SEND_B, RECV_B) over the one boundary = 26.
  EXPECT_EQ(Built("gpipe", Params(2, 3, 1, 1)).OpCount(), 26u);
  EXPECT_EQ(Estimate("gpipe", Params(2, 3, 1, 1)), 26);
  // pipedream, 2 ranks x 2 microbatches x 2 steps: F 8 + B 8 + a STEP after every backward 8 +
  // 4 x 2 x 2 comms = 40.
  EXPECT_EQ(Built("pipedream", Params(2, 2, 2, 1)).OpCount(), 40u);
  EXPECT_EQ(Estimate("pipedream", Params(2, 2, 2, 1)), 40);
  // interleaved, 2 ranks x 2 chunks x 2 microbatches: 4 stages, 8 units: F 8 + B 8 + STEP 4 +
  // 3 crossing boundaries x 2 microbatches x 4 = 44.
  EXPECT_EQ(Built("interleaved", Params(2, 2, 1, 2)).OpCount(), 44u);
  EXPECT_EQ(Estimate("interleaved", Params(2, 2, 1, 2)), 44);
  // zb-v, 2 ranks x 2 chunks (V: stages on ranks 0, 1, 1, 0, so 2 of 3 boundaries cross) x 2
  // microbatches: F 8 + I 8 + W 8 + STEP 4 + 2 x 2 x 4 = 44.
  EXPECT_EQ(Built("zb-v", Params(2, 2, 1, 2)).OpCount(), 44u);
  EXPECT_EQ(Estimate("zb-v", Params(2, 2, 1, 2)), 44);
  // 2bw, 2 ranks x 4 microbatches x 2 steps: F 16 + B 16 + STEP 2 x 2 + 4 x 4 x 2 = 68.
  EXPECT_EQ(Built("2bw", Params(2, 4, 2, 1)).OpCount(), 68u);
  EXPECT_EQ(Estimate("2bw", Params(2, 4, 2, 1)), 68);
}

// A family that may split its backward is counted with an I + W pair per unit: the estimate is
// the count plus one per B the schedule kept whole.
TEST(EstimateSize, SplitFamiliesCountEachBAsAPair) {
  for (const auto& [name, p] : {std::pair{"zb-h1", Params(3, 3, 1, 1)}, std::pair{"zb-h2", Params(4, 8, 2, 1)},
                                std::pair{"dualpipe-v", Params(2, 4, 1, 2)}}) {
    const Schedule s = Built(name, p);
    size_t whole = 0;
    for (const auto& ops : s.ops) {
      for (const Op& op : ops) whole += op.kind == OpKind::kB ? 1 : 0;
    }
    EXPECT_EQ(Estimate(name, p), static_cast<double>(s.OpCount() + whole)) << name;
  }
  // zb-h1 on 3 ranks x 3 microbatches keeps 3 B whole: 51 ops, estimated 54.
  EXPECT_EQ(Built("zb-h1", Params(3, 3, 1, 1)).OpCount(), 51u);
  EXPECT_EQ(Estimate("zb-h1", Params(3, 3, 1, 1)), 54);
}

// Every generator of the table over a sweep: an upper bound, exact for one-B families, and at
// most 1.5 times the count for the others (3 compute ops counted where 2 may run, one rank).
TEST(EstimateSize, BoundsEveryGeneratorWithinASmallFactor) {
  for (const GeneratorInfo& info : Generators()) {
    for (int ranks : {1, 2, 3, 4, 8}) {
      for (int m : {1, 2, 4, 8, 12}) {
        for (int steps : {1, 3}) {
          const GeneratorParams p = Params(ranks, m, steps, info.interleaved ? 2 : 1);
          if (!CheckParams(info, p).empty()) continue;
          const double actual = static_cast<double>(Built(info.name, p).OpCount());
          const double estimate = EstimateSize(info, p).ops;
          const std::string where = fmt::format("{} {}x{}x{}", info.name, ranks, m, steps);
          EXPECT_GE(estimate, actual) << where;
          EXPECT_LE(estimate, 1.5 * actual) << where;
          EXPECT_EQ(EstimateSize(info, p).bytes, estimate * kBytesPerOp) << where;
        }
      }
    }
  }
}

TEST(EstimateSize, HugeParametersStayFinite) {
  const SizeEstimate e = EstimateSize(*FindGenerator("pipedream"), Params(1 << 16, 1 << 24, 1 << 20, 1));
  EXPECT_TRUE(std::isfinite(e.ops));
  // 2^16 stages x 2^24 microbatches x 2^20 steps = 2^60 units: F + B + STEP each, + 4 comms over
  // 2^16 - 1 boundaries.
  EXPECT_DOUBLE_EQ(e.ops, 3 * std::ldexp(1, 60) + 4 * (std::ldexp(1, 16) - 1) * std::ldexp(1, 44));
}

TEST(CheckSize, NamesTheEstimateTheLimitAndTheFlag) {
  // 1f1b, 65536 ranks x 1e6 microbatches: 2 x 6.5536e10 compute + 65536 STEPs + 4 x 65535 x 1e6
  // comms = 3.93e11 ops; x 200 B = 79 TB.
  const GeneratorParams p = Params(65536, 1000000, 1, 1);
  const SizeEstimate e = EstimateSize(*FindGenerator("1f1b"), p);
  EXPECT_DOUBLE_EQ(e.ops, 2 * 65536e6 + 65536 + 4 * 65535e6);
  EXPECT_EQ(ErrorOf([&] { CheckSize(DescribeShape("1f1b", p), e); }),
            "1f1b with 65536 ranks x 1000000 microbatches x 1 step: about 3.9e+11 ops (about 79 TB to simulate), "
            "above the limit of 2e+07 ops; raise it with --max-ops N");
  EXPECT_EQ(DescribeShape("interleaved", Params(4, 8, 3, 2)), "interleaved with 4 ranks x 2 chunks x 8 microbatches x 3 steps");
}

TEST(CheckSize, TheLimitItselfPasses) {
  SizeEstimate at_limit;
  at_limit.ops = static_cast<double>(kDefaultMaxOps);
  EXPECT_EQ(ErrorOf([&] { CheckSize("s", at_limit); }), "");
  SizeEstimate over = at_limit;
  over.ops += 1;
  EXPECT_NE(ErrorOf([&] { CheckSize("s", over); }), "");
  EXPECT_EQ(ErrorOf([&] { CheckSize("s", over, kDefaultMaxOps + 1); }), "");
  // Imported schedules: one step's ops times the steps; several schedules add up.
  EXPECT_EQ(EstimateImportedSize(1000, 20000).ops, 2e7);
  SizeEstimate total = EstimateImportedSize(1000, 20000);
  total += EstimateImportedSize(1, 1);
  EXPECT_EQ(ErrorOf([&] { CheckSize("the scenario's 2 schedules", total); }),
            "the scenario's 2 schedules: about 20000001 ops (about 4 GB to simulate), above the limit of 2e+07 ops; "
            "raise it with --max-ops N");
  // 1f1b on 4 ranks x 1,000,000 microbatches: 2 x 4e6 compute + 4 STEPs + 4 x 3 x 1e6 comms.
  const GeneratorParams p = Params(4, 1000000, 1, 1);
  EXPECT_EQ(ErrorOf([&] { CheckSize(DescribeShape("1f1b", p), EstimateSize(*FindGenerator("1f1b"), p)); }),
            "1f1b with 4 ranks x 1000000 microbatches x 1 step: about 20000004 ops (about 4 GB to simulate), above "
            "the limit of 2e+07 ops; raise it with --max-ops N");
}

}  // namespace
}  // namespace stagecraft::schedules
