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
#include <fstream>
#include <map>
#include <sstream>
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

// One row of Table 9 (times in microseconds) with its Table 5 bubble rates, as
// tests/data/zero_bubble_paper.csv states them (scripts/zb-paper-replay.sh reads it too).
struct PaperSetting {
  std::string model;
  int p = 0, m = 0, chunks = 1;  // chunks: interleaved, one layer per chunk
  int64_t f_us = 0, b_us = 0, w_us = 0, comm_us = 0;
  double one_f_one_b = 0, interleaved = 0, zb_h1 = 0, zb_h2 = 0;
};

std::vector<PaperSetting> PaperTable() {
  std::ifstream in(std::string(STAGECRAFT_TEST_DATA) + "/zero_bubble_paper.csv");
  EXPECT_TRUE(in) << "tests/data/zero_bubble_paper.csv";
  std::vector<PaperSetting> rows;
  bool header = true;
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    if (header) {
      header = false;
      continue;
    }
    std::replace(line.begin(), line.end(), ',', ' ');
    std::istringstream fields(line);
    PaperSetting r;
    fields >> r.model >> r.p >> r.m >> r.chunks >> r.f_us >> r.b_us >> r.w_us >> r.comm_us >> r.one_f_one_b >>
        r.interleaved >> r.zb_h1 >> r.zb_h2;
    EXPECT_FALSE(fields.fail()) << line;
    rows.push_back(r);
  }
  EXPECT_EQ(rows.size(), 12u);  // Table 5's twelve settings
  return rows;
}

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
  for (const PaperSetting& s : PaperTable()) {
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
  for (const PaperSetting& s : PaperTable()) {
    const int v = s.chunks;
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
