// The simulator against the Zero Bubble paper's own cost model (Qi et al., "Zero Bubble
// (Almost) Pipeline Parallelism", ICLR 2024, §5.3). That model replays a schedule with the
// profiled T_F, T_B, T_W and T_comm of Appendix D, Table 9: a pass starts when its stage is free
// and its input has arrived, T_comm after the producing pass ended on the neighbouring stage.
// Its bubble rate is (cost - m (T_F + T_B + T_W)) / cost, with cost the largest per-stage
// execution time (first F start to last pass end, Appendix G eq. 3). The simulator matches it
// when receives are posted ahead (schedules/lower.h) and a transfer costs only its latency.
//
// Oracles: Table 5's bubble rates for 1F1B, ZB-H1 and ZB-H2, printed to 4 decimals, so the
// simulator must be within 1e-4; and, for every order including interleaved 1F1B, an
// independent longest-path replay of the unlowered order, written here.
#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "sim_test_util.h"
#include "stagecraft/schedules/generators.h"
#include "stagecraft/schedules/lower.h"
#include "stagecraft/sim/engine.h"

namespace stagecraft::sim {
namespace {

using schedules::OpKind;
using schedules::Schedule;
using testing::kUs;

// One row of Table 9 (times in microseconds) with its Table 5 bubble rates.
struct PaperSetting {
  const char* model;
  int p, m;
  int64_t f_us, b_us, w_us, comm_us;
  double one_f_one_b, zb_h1, zb_h2;
};

constexpr PaperSetting kTable[] = {
    {"1.5B", 8, 24, 18522, 18086, 9337, 601, 0.2431, 0.1585, 0.1083},
    {"1.5B", 8, 32, 18513, 18086, 9331, 626, 0.1985, 0.1242, 0.0837},
    {"1.5B", 8, 64, 18546, 18097, 9321, 762, 0.1240, 0.0674, 0.0444},
    {"6.2B", 8, 24, 29718, 29444, 19927, 527, 0.2347, 0.1323, 0.0698},
    {"6.2B", 8, 32, 29802, 29428, 19530, 577, 0.1898, 0.1045, 0.0559},
    {"6.2B", 8, 64, 29935, 29621, 19388, 535, 0.1091, 0.0554, 0.0294},
    {"14.6B", 16, 48, 11347, 11248, 8132, 377, 0.2552, 0.1397, 0.0672},
    {"14.6B", 16, 64, 11307, 11254, 8101, 379, 0.2082, 0.1088, 0.0516},
    {"14.6B", 16, 128, 11325, 11308, 8109, 378, 0.1251, 0.0576, 0.0266},
    {"28.3B", 32, 96, 10419, 10207, 7715, 408, 0.2646, 0.1421, 0.0641},
    {"28.3B", 32, 128, 10408, 10204, 7703, 408, 0.2168, 0.1106, 0.0490},
    {"28.3B", 32, 256, 10402, 10248, 7698, 460, 0.1352, 0.0594, 0.0257},
};

// Per virtual stage: a rank's costs split evenly over its `chunks` stages, T_comm per hop.
CostTable PaperCosts(const PaperSetting& s, int chunks) {
  CostTable costs = testing::Uniform(s.p * chunks, s.f_us * kUs / chunks, s.b_us * kUs / chunks,
                                     s.w_us * kUs / chunks);
  costs.p2p_latency_ns = s.comm_us * kUs;
  return costs;
}

int64_t ComputeNs(const StageCost& c, OpKind kind) {
  switch (kind) {
    case OpKind::kF: return c.forward_ns;
    case OpKind::kI: return c.backward_input_ns;
    case OpKind::kW: return c.backward_weight_ns;
    case OpKind::kB: return c.backward_input_ns + c.backward_weight_ns;
    default: return 0;
  }
}

// The paper's replay of an unlowered order: each rank runs its compute passes in order; a pass
// starts at max(its rank's previous end, its input's end + T_comm when that input was made on
// another rank). Returns the largest per-rank span (first F start to last pass end).
int64_t ReplaySpan(const Schedule& order, const CostTable& costs, int64_t comm_ns) {
  const int stages = order.stages();
  // End time of the pass producing each (stage, microbatch)'s forward output and input gradient.
  std::map<std::tuple<int, int, int>, int64_t> end;  // (kind 0 = F, 1 = gradient, stage, mb)
  std::vector<size_t> next(order.ranks(), 0);
  std::vector<int64_t> free_at(order.ranks(), 0), first(order.ranks(), -1);
  for (bool moved = true; moved;) {
    moved = false;
    for (int r = 0; r < order.ranks(); ++r) {
      for (; next[r] < order.ops[r].size(); ++next[r]) {
        const schedules::Op& op = order.ops[r][next[r]];
        if (!schedules::IsCompute(op.kind)) continue;
        std::tuple<int, int, int> input;
        bool has_input = true;
        if (op.kind == OpKind::kF) {
          has_input = op.stage > 0;
          input = {0, op.stage - 1, op.microbatch};
        } else if (op.kind == OpKind::kW) {
          input = {1, op.stage, op.microbatch};
        } else {
          input = op.stage == stages - 1 ? std::tuple{0, op.stage, op.microbatch}
                                         : std::tuple{1, op.stage + 1, op.microbatch};
        }
        int64_t start = free_at[r];
        if (has_input) {
          const auto it = end.find(input);
          if (it == end.end()) break;  // wait for another rank
          const bool remote = order.shape.RankOf(std::get<1>(input)) != r;
          start = std::max(start, it->second + (remote ? comm_ns : 0));
        }
        if (first[r] < 0) first[r] = start;
        free_at[r] = start + ComputeNs(costs.stages[op.stage], op.kind);
        if (op.kind == OpKind::kF) end[{0, op.stage, op.microbatch}] = free_at[r];
        if (op.kind == OpKind::kI || op.kind == OpKind::kB) end[{1, op.stage, op.microbatch}] = free_at[r];
        moved = true;
      }
    }
  }
  int64_t span = 0;
  for (int r = 0; r < order.ranks(); ++r) {
    EXPECT_EQ(next[r], order.ops[r].size()) << "replay stuck on rank " << r;
    span = std::max(span, free_at[r] - first[r]);
  }
  return span;
}

// The simulator's largest per-rank span (first compute start to last compute end, as
// `span_ms` in the metrics) for `order` lowered with receives ahead.
int64_t SimulatedSpan(const Schedule& order, const CostTable& costs) {
  const Schedule lowered = schedules::Lower(order, schedules::P2p::kAhead);
  const RunRecord record = Simulate(lowered, costs, testing::Node(order.ranks()), SimConfig{});
  int64_t span = 0;
  for (int r = 0; r < lowered.ranks(); ++r) {
    int64_t first = -1, last = 0;
    for (size_t i = 0; i < lowered.ops[r].size(); ++i) {
      if (!schedules::IsCompute(lowered.ops[r][i].kind)) continue;
      if (first < 0) first = record.ranks[r].ops[i].start_ns;
      last = std::max(last, record.ranks[r].ops[i].end_ns);
    }
    span = std::max(span, last - first);
  }
  return span;
}

double BubbleRate(const PaperSetting& s, int64_t span_ns) {
  const double ideal = static_cast<double>(s.m) * (s.f_us + s.b_us + s.w_us) * kUs;
  return (static_cast<double>(span_ns) - ideal) / static_cast<double>(span_ns);
}

TEST(ZeroBubblePaper, TableFiveBubbleRates) {
  for (const PaperSetting& s : kTable) {
    const CostTable costs = PaperCosts(s, 1);
    for (const auto& [name, expected] :
         {std::pair{"1f1b", s.one_f_one_b}, std::pair{"zb-h1", s.zb_h1}, std::pair{"zb-h2", s.zb_h2}}) {
      const Schedule order = schedules::Generate(name, schedules::test_cases::Params(s.p, s.m));
      const int64_t span = SimulatedSpan(order, costs);
      EXPECT_NEAR(BubbleRate(s, span), expected, 1e-4) << s.model << " m=" << s.m << " " << name;
      EXPECT_EQ(span, ReplaySpan(order, costs, s.comm_us * kUs)) << s.model << " m=" << s.m << " " << name;
    }
  }
}

// Interleaved 1F1B in Megatron-LM's order, one transformer layer per chunk as in §5.1 (3, 4, 3
// and 2 chunks). The simulator equals the replay to the nanosecond. Without latency the bubble
// is Megatron's closed form (p-1)(T_F+T_B+T_W)/v; each hop's T_comm then adds to the critical
// path once per hop of the first microbatch, forward and backward: 2 (pv - 1) T_comm.
// (Table 5's 1F1B-I column is p T_comm shorter than this order allows; see README.)
TEST(ZeroBubblePaper, InterleavedMatchesReplayAndClosedForm) {
  const std::map<std::string, int> chunks{{"1.5B", 3}, {"6.2B", 4}, {"14.6B", 3}, {"28.3B", 2}};
  for (const PaperSetting& s : kTable) {
    const int v = chunks.at(s.model);
    const Schedule order = schedules::Generate("interleaved", schedules::test_cases::Params(s.p, s.m, 1, v));
    for (const int64_t comm_us : {int64_t{0}, s.comm_us}) {
      CostTable costs = PaperCosts(s, v);
      costs.p2p_latency_ns = comm_us * kUs;
      const int64_t span = SimulatedSpan(order, costs);
      EXPECT_EQ(span, ReplaySpan(order, costs, comm_us * kUs)) << s.model << " m=" << s.m;
      const StageCost& c = costs.stages[0];
      const int64_t per_mb = c.forward_ns + c.backward_input_ns + c.backward_weight_ns;  // one chunk
      const int64_t closed = (int64_t{s.m} * v + s.p - 1) * per_mb + 2 * (int64_t{s.p} * v - 1) * comm_us * kUs;
      EXPECT_EQ(span, closed) << s.model << " m=" << s.m << " comm " << comm_us << "us";
    }
  }
}

}  // namespace
}  // namespace stagecraft::sim
