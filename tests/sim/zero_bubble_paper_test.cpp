// The simulator against the Zero Bubble paper's own cost model (Qi et al., "Zero Bubble
// (Almost) Pipeline Parallelism", ICLR 2024, §5.3). That model replays a schedule with the
// profiled T_F, T_B, T_W and T_comm of Appendix D, Table 9: a pass starts when its stage is free
// and its input has arrived, T_comm after the producing pass ended on the neighbouring stage.
// Its bubble rate is (cost - m (T_F + T_B + T_W)) / cost, with cost the largest per-stage
// execution time (first F start to last pass end, Appendix G eq. 3). The simulator matches it
// when receives are posted ahead (schedules/lower.h) and a transfer costs only its latency.
//
// Oracles: Table 5's bubble rates for 1F1B, ZB-H1 and ZB-H2, printed to 4 decimals, so the
// simulator must be within 1e-4; for every order including interleaved 1F1B, an independent
// longest-path replay of the unlowered order, written here; and for 1F1B-I the paper's own
// replay procedure (the authors' repository, megatron/core/pipeline_parallel/interleave.py),
// restated below, which reproduces Table 5's 1F1B-I column to 4 decimals.
#include <algorithm>
#include <cstdint>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "../data_csv.h"

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
// data/zero_bubble_paper.csv states them (scripts/zb-paper-replay.sh reads it too).
struct PaperSetting {
  std::string model;
  int p = 0, m = 0, chunks = 1;  // chunks: interleaved, one layer per chunk
  int64_t f_us = 0, b_us = 0, w_us = 0, comm_us = 0;
  double one_f_one_b = 0, interleaved = 0, zb_h1 = 0, zb_h2 = 0;
  double interleaved_every_edge = 0;  // not published: the authors' 1F1B-I replay with every edge
};

std::vector<PaperSetting> PaperTable() {
  std::vector<PaperSetting> rows;
  for (const auto& c : testing_data::ReadDataCsv("zero_bubble_paper.csv")) {
    PaperSetting r;
    r.model = c.at("model");
    r.p = std::stoi(c.at("p"));
    r.m = std::stoi(c.at("m"));
    r.chunks = std::stoi(c.at("chunks"));
    r.f_us = std::stoll(c.at("f_us"));
    r.b_us = std::stoll(c.at("b_us"));
    r.w_us = std::stoll(c.at("w_us"));
    r.comm_us = std::stoll(c.at("comm_us"));
    r.one_f_one_b = std::stod(c.at("1f1b"));
    r.interleaved = std::stod(c.at("1f1b_i"));
    r.zb_h1 = std::stod(c.at("zb_h1"));
    r.zb_h2 = std::stod(c.at("zb_h2"));
    r.interleaved_every_edge = std::stod(c.at("1f1b_i_every_edge"));
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

// The paper's 1F1B-I replay, restated from the authors' repository
// (megatron/core/pipeline_parallel/interleave.py, the script behind Table 5's 1F1B-I column).
// Rank r runs min((p-r-1)*2 + (v-1)*p, m*v) forwards, then alternates F and B, then the
// remaining Bs. Its i-th forward is microbatch (i / pv) p + i % p in chunk (i % pv) / p; its i-th
// backward likewise, counting chunks from the last one. Slots are evaluated column by column,
// forwards by ascending rank, backwards by descending rank. A pass ends at
// max(rank free, input end + T_comm) + its cost. The input of a forward on rank r > 0 is the
// same (microbatch, chunk) on rank r-1; of a backward on rank r < p-1, on rank r+1. At the chunk
// boundary (rank 0's forward of chunk c > 0 needs rank p-1's chunk c-1, and the mirror image
// for backwards) the repository applies the edge only to the first microbatch of each group of
// p (`_rk == 0`); `every_wrap` applies it to every microbatch, as the order requires.
struct PaperReplay {
  int64_t cost = 0;   // latest end (every rank starts at 0; rank 0's first F starts at 0)
  int64_t span = 0;   // largest per-rank span (first F start to last pass end)
  int early = 0;      // boundary passes that started before their input had arrived
};

PaperReplay PaperInterleavedReplay(int p, int m, int v, int64_t f, int64_t b, int64_t comm, bool every_wrap) {
  EXPECT_EQ(m % p, 0) << "the paper's replay assumes m divisible by p";
  const int passes = m * v;
  std::vector<std::vector<bool>> is_forward(p);  // per rank, its slot sequence
  for (int r = 0; r < p; ++r) {
    const int warmup = std::min((p - r - 1) * 2 + (v - 1) * p, passes);
    is_forward[r].assign(warmup, true);
    for (int i = 0; i < passes; ++i) {
      if (warmup + i < passes) is_forward[r].push_back(true);
      is_forward[r].push_back(false);
    }
  }
  std::map<std::tuple<bool, int, int, int>, int64_t> end;  // (forward, rank, microbatch, chunk)
  std::vector<int64_t> free_at(p, 0), first(p, -1);
  std::vector<int> forwards(p, 0), backwards(p, 0);
  PaperReplay out;
  for (int slot = 0; slot < 2 * passes; ++slot) {
    std::vector<int> order;
    for (int r = 0; r < p; ++r)
      if (is_forward[r][slot]) order.push_back(r);
    for (int r = p - 1; r >= 0; --r)
      if (!is_forward[r][slot]) order.push_back(r);
    for (const int r : order) {
      const bool fwd = is_forward[r][slot];
      const int i = fwd ? forwards[r]++ : backwards[r]++;
      const int group = i % p, chunk = (i % (p * v)) / p, mb = (i / (p * v)) * p + group;
      const int neighbour = fwd ? r - 1 : r + 1;
      std::tuple<bool, int, int, int> input{fwd, neighbour, mb, chunk};
      bool applies = neighbour >= 0 && neighbour < p;
      if (!applies && chunk > 0) {  // the chunk boundary
        input = {fwd, fwd ? p - 1 : 0, mb, chunk - 1};
        applies = every_wrap || group == 0;
        const auto made = end.find(input);  // not made yet: it arrives later still
        if (!applies && (made == end.end() || made->second + comm > free_at[r])) ++out.early;
      }
      int64_t start = free_at[r];
      if (applies) start = std::max(start, end.at(input) + comm);
      if (first[r] < 0) first[r] = start;
      free_at[r] = start + (fwd ? f : b);
      end[{fwd, r, mb, chunk}] = free_at[r];
    }
  }
  for (int r = 0; r < p; ++r) {
    out.cost = std::max(out.cost, free_at[r]);
    out.span = std::max(out.span, free_at[r] - first[r]);
  }
  return out;
}

// Table 5's 1F1B-I column is the paper's replay as published: within 1e-4 in all 12 settings.
// That replay skips the chunk-boundary edge for p-1 of every p microbatches, and in every
// setting it starts at least one pass before its input arrived, so no execution of the order
// achieves it. With the edge for every microbatch the same replay equals the simulator to the
// nanosecond, and then no pass starts early.
TEST(ZeroBubblePaper, InterleavedEqualsThePapersReplayWithEveryEdge) {
  for (const PaperSetting& s : PaperTable()) {
    const int v = s.chunks;
    const CostTable costs = PaperCosts(s, v);
    const StageCost& c = costs.stages[0];
    const int64_t f = c.forward_ns, b = c.backward_input_ns + c.backward_weight_ns, comm = s.comm_us * kUs;

    const PaperReplay published = PaperInterleavedReplay(s.p, s.m, v, f, b, comm, /*every_wrap=*/false);
    EXPECT_NEAR(BubbleRate(s, published.cost), s.interleaved, 1e-4) << s.model << " m=" << s.m;
    EXPECT_GT(published.early, 0) << s.model << " m=" << s.m;

    const PaperReplay complete = PaperInterleavedReplay(s.p, s.m, v, f, b, comm, /*every_wrap=*/true);
    EXPECT_EQ(complete.early, 0) << s.model << " m=" << s.m;
    EXPECT_NEAR(BubbleRate(s, complete.cost), s.interleaved_every_edge, 1e-4) << s.model << " m=" << s.m;
    const Schedule order = schedules::Generate("interleaved", schedules::test_cases::Params(s.p, s.m, 1, v));
    const int64_t simulated = SimulatedSpan(order, costs);
    EXPECT_EQ(simulated, complete.span) << s.model << " m=" << s.m;
    EXPECT_EQ(simulated, complete.cost) << s.model << " m=" << s.m;  // rank 0 starts at 0 and ends last
    EXPECT_GT(BubbleRate(s, simulated), s.interleaved) << s.model << " m=" << s.m;
  }
}

}  // namespace
}  // namespace stagecraft::sim
