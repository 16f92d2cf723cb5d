// The Zero Bubble scheduler's refinement (zb_ilp.h) against an exhaustive search written here:
// every order of every stage (a stage's F, B and W in microbatch order, B_j after F_j, W_j after
// B_j: the sequences with #F >= #B >= #W at every prefix), every combination of stages, each
// checked against the memory limit and timed two ways by hand-written evaluators:
// - as soon as possible (each pass at the later of its stage's previous end and its inputs'
//   ends plus the transfer), the timing the heuristic and the simulator use;
// - with each pass free to wait, the least longest stage span the orders allow (the paper's
//   objective): a binary search on the span over the difference constraints, each checked for a
//   positive cycle by Bellman-Ford.
// The program, solved to the end, must find the least of the second over all orders; its order,
// timed the first way, must be no longer than the heuristic's.
#include "stagecraft/schedules/zb_ilp.h"

#include <algorithm>
#include <functional>
#include <limits>
#include <vector>

#include <gtest/gtest.h>

#include "stagecraft/schedules/zb_auto.h"

namespace stagecraft::schedules {
namespace {

using StageOrder = std::vector<std::pair<OpKind, int>>;

struct Case {
  std::vector<double> f, b, w;
  double comm;
  double mem_f, mem_b, mem_w, limit;
  int m;
};

ZbAutoCosts CostsOf(const Case& c) {
  ZbAutoCosts z;
  z.f = c.f, z.b = c.b, z.w = c.w;
  z.comm = c.comm;
  const size_t p = c.f.size();
  z.mem_f.assign(p, c.mem_f), z.mem_b.assign(p, c.mem_b), z.mem_w.assign(p, c.mem_w), z.max_mem.assign(p, c.limit);
  z.microbatches = c.m;
  return z;
}

// Every order of one stage.
void Orders(int m, StageOrder& prefix, int nf, int nb, int nw, std::vector<StageOrder>* out) {
  if (nw == m) {
    out->push_back(prefix);
    return;
  }
  const std::pair<OpKind, int> next[] = {{OpKind::kF, nf}, {OpKind::kI, nb}, {OpKind::kW, nw}};
  const bool can[] = {nf < m, nb < nf, nw < nb};
  for (int k = 0; k < 3; ++k) {
    if (!can[k]) continue;
    prefix.push_back(next[k]);
    Orders(m, prefix, nf + (k == 0), nb + (k == 1), nw + (k == 2), out);
    prefix.pop_back();
  }
}

struct Graph {
  int n = 0;
  struct Edge {
    int from, to;
    double w;
    bool span;  // weight w - T
  };
  std::vector<Edge> edges;
};

// Node numbering: (stage, kind 0/1/2, microbatch); node n is the source (time 0).
struct Timed {
  bool memory_ok = true;
  bool deadlock = false;  // the stages' orders wait on each other
  bool ok() const { return memory_ok && !deadlock; }
  double asap = 0;  // the longest stage span, every pass as soon as possible
  double free = 0;  // the least longest stage span with passes free to wait
};

Timed Time(const Case& c, const std::vector<StageOrder>& orders) {
  const int p = static_cast<int>(c.f.size()), m = c.m;
  const auto id = [&](int s, int kind, int j) { return (s * 3 + kind) * m + j; };
  const auto kind_of = [](OpKind k) { return k == OpKind::kF ? 0 : k == OpKind::kI ? 1 : 2; };
  const auto cost = [&](int s, int kind) { return kind == 0 ? c.f[s] : kind == 1 ? c.b[s] : c.w[s]; };
  Timed t;
  for (int s = 0; s < p; ++s) {
    double held = 0;
    for (const auto& [k, j] : orders[s]) {
      const int kind = kind_of(k);
      held += kind == 0 ? c.mem_f : kind == 1 ? c.mem_b : c.mem_w;
      if (held > c.limit + 1e-12) t.memory_ok = false;
    }
  }
  // Dependencies: edges (from, to, the least gap from's end to to's end = to's cost + transfer).
  Graph g;
  g.n = 3 * p * m + 1;
  const int src = 3 * p * m;
  for (int s = 0; s < p; ++s) {
    for (int j = 0; j < m; ++j) {
      for (int kind = 0; kind < 3; ++kind) g.edges.push_back({src, id(s, kind, j), cost(s, kind), false});
      if (s > 0) g.edges.push_back({id(s - 1, 0, j), id(s, 0, j), c.f[s] + c.comm, false});
      if (s + 1 < p) g.edges.push_back({id(s + 1, 1, j), id(s, 1, j), c.b[s] + c.comm, false});
      if (s + 1 == p) g.edges.push_back({id(s, 0, j), id(s, 1, j), c.b[s], false});
      g.edges.push_back({id(s, 1, j), id(s, 2, j), c.w[s], false});
    }
    for (size_t k = 1; k < orders[s].size(); ++k) {
      const int a = id(s, kind_of(orders[s][k - 1].first), orders[s][k - 1].second);
      const int b = id(s, kind_of(orders[s][k].first), orders[s][k].second);
      g.edges.push_back({a, b, cost(s, kind_of(orders[s][k].first)), false});
    }
    // The stage's span: last end - (first F end - f) <= T, as first_F >= last + f - T.
    const int last = id(s, kind_of(orders[s].back().first), orders[s].back().second);
    g.edges.push_back({last, id(s, 0, 0), c.f[s], true});
  }
  // Longest paths from the source (-inf where unreached); false on a positive cycle.
  const auto longest = [&](double span, bool with_span, std::vector<double>* dist) {
    dist->assign(g.n, -std::numeric_limits<double>::infinity());
    (*dist)[src] = 0;
    for (int round = 0; round < g.n; ++round) {
      bool changed = false;
      for (const Graph::Edge& e : g.edges) {
        if (e.span && !with_span) continue;
        const double w = e.span ? e.w - span : e.w;
        if ((*dist)[e.from] + w > (*dist)[e.to] + 1e-9) {
          (*dist)[e.to] = (*dist)[e.from] + w;
          changed = true;
        }
      }
      if (!changed) return true;
    }
    return false;
  };
  std::vector<double> end;
  if (!longest(0, false, &end)) {
    t.deadlock = true;
    return t;
  }
  const auto span_of = [&](const std::vector<double>& e) {
    double worst = 0;
    for (int s = 0; s < p; ++s) {
      const int last = id(s, kind_of(orders[s].back().first), orders[s].back().second);
      worst = std::max(worst, e[last] - (e[id(s, 0, 0)] - c.f[s]));
    }
    return worst;
  };
  t.asap = span_of(end);
  double lo = 0, hi = t.asap;
  for (int it = 0; it < 60; ++it) {
    const double mid = (lo + hi) / 2;
    std::vector<double> d;
    (longest(mid, true, &d) ? hi : lo) = mid;
  }
  t.free = hi;
  return t;
}

struct Exhaustive {
  double best_asap = std::numeric_limits<double>::infinity();
  double best_free = std::numeric_limits<double>::infinity();
};

Exhaustive Search(const Case& c, const std::function<void(const std::vector<StageOrder>&, const Timed&)>& each) {
  std::vector<StageOrder> one;
  StageOrder prefix;
  Orders(c.m, prefix, 0, 0, 0, &one);
  const int p = static_cast<int>(c.f.size());
  Exhaustive out;
  std::vector<size_t> pick(p, 0);
  while (true) {
    std::vector<StageOrder> orders;
    for (int s = 0; s < p; ++s) orders.push_back(one[pick[s]]);
    const Timed t = Time(c, orders);
    each(orders, t);
    if (t.ok()) {
      out.best_asap = std::min(out.best_asap, t.asap);
      out.best_free = std::min(out.best_free, t.free);
    }
    int s = 0;
    while (s < p && ++pick[s] == one.size()) pick[s++] = 0;
    if (s == p) break;
  }
  return out;
}

const std::vector<Case>& Cases() {
  static const std::vector<Case> kCases = {
      // Two stages, three microbatches, W cheaper than B, two forwards' activations at most.
      {{3, 3}, {2, 2}, {1, 1}, 1, 2, -1, -1, 4, 3},
      // The last stage half again as heavy, a transfer, no memory limit to speak of.
      {{2, 3}, {2, 3}, {1, 1.5}, 0.5, 1, -0.5, -0.5, 100, 3},
      // Three stages, two microbatches, uneven, one forward at a time on each stage.
      {{1, 2, 1.5}, {1.5, 2, 1}, {0.5, 1, 1}, 0.25, 1, -0.5, -0.5, 1, 2},
      // Three stages, two microbatches, W as costly as F, room for both forwards.
      {{2, 2, 2}, {2, 2, 2}, {2, 2, 2}, 0, 1, -0.5, -0.5, 2, 2},
  };
  return kCases;
}

TEST(ZbIlp, SolvedToTheEndItFindsTheLeastSpanOfEveryOrder) {
  ASSERT_TRUE(ZbIlpAvailable()) << "this build has no CBC: install coinor-libcbc-dev";
  for (size_t k = 0; k < Cases().size(); ++k) {
    const Case& c = Cases()[k];
    const ZbAutoCosts costs = CostsOf(c);
    std::string why;
    const std::optional<ZbAutoOrder> heuristic = ZbAutoSchedule(costs, &why);
    ASSERT_TRUE(heuristic) << k << ": " << why;
    const Exhaustive all = Search(c, [](const std::vector<StageOrder>&, const Timed&) {});
    ASSERT_LT(all.best_free, std::numeric_limits<double>::infinity());
    // The heuristic is one of the orders, timed as soon as possible.
    EXPECT_GE(heuristic->span, all.best_asap - 1e-9) << k;
    const ZbIlpResult r = ZbIlpRefine(costs, *heuristic, ZbIlpLimits{});
    EXPECT_TRUE(r.optimal) << k << ": " << r.status;
    EXPECT_NEAR(r.lower_bound, all.best_free, 1e-6) << k;
    // Its order holds, is timed as the heuristic's is, and is no longer than the heuristic's.
    const Timed mine = Time(c, r.order.order);
    EXPECT_TRUE(mine.ok()) << k;
    EXPECT_NEAR(r.order.span, mine.asap, 1e-9) << k;
    EXPECT_LE(r.order.span, heuristic->span + 1e-9) << k;
    EXPECT_EQ(r.improved, r.order.span < heuristic->span - 1e-9) << k;
  }
}

TEST(ZbIlp, OrderSpanTimesEveryOrderAsSoonAsPossibleAndRefusesTheMemoryLimit) {
  for (const Case& c : Cases()) {
    const ZbAutoCosts costs = CostsOf(c);
    int refused = 0;
    Search(c, [&](const std::vector<StageOrder>& orders, const Timed& t) {
      const double span = ZbOrderSpan(costs, orders);
      if (!t.ok()) {
        EXPECT_EQ(span, -1);
        refused += !t.deadlock;
      } else {
        EXPECT_NEAR(span, t.asap, 1e-9);
      }
    });
    if (c.limit < c.m * c.mem_f) {
      EXPECT_GT(refused, 0);  // the limit binds somewhere
    }
  }
  // A stage's own dependency broken (W before its B) or a pass missing: refused.
  const ZbAutoCosts one = CostsOf({{1}, {1}, {1}, 0, 1, -0.5, -0.5, 10, 1});
  EXPECT_EQ(ZbOrderSpan(one, {{{OpKind::kF, 0}, {OpKind::kW, 0}, {OpKind::kI, 0}}}), -1);
  EXPECT_EQ(ZbOrderSpan(one, {{{OpKind::kF, 0}, {OpKind::kI, 0}}}), -1);
  EXPECT_EQ(ZbOrderSpan(one, {{{OpKind::kF, 0}, {OpKind::kI, 0}, {OpKind::kW, 0}}}), 3);
}

// Through the generator: zb-2p refined stays a schedule of the same passes, and a node limit
// gives the same order every time (every rank of an execute builds its own).
TEST(ZbIlp, TheGeneratorRefinesWithinANodeLimitAndRepeatsItself) {
  ZbAutoCosts costs = CostsOf(Cases()[1]);
  costs.refine_nodes = 50;
  std::string why;
  const std::optional<ZbAutoOrder> a = ZbAutoSchedule(costs, &why);
  const std::optional<ZbAutoOrder> b = ZbAutoSchedule(costs, &why);
  ASSERT_TRUE(a && b) << why;
  EXPECT_EQ(a->order, b->order);
  EXPECT_LE(a->span, a->heuristic_span + 1e-9);
  EXPECT_FALSE(a->refinement.empty());
  EXPECT_NEAR(ZbOrderSpan(costs, a->order), a->span, 1e-9);
}

}  // namespace
}  // namespace stagecraft::schedules
