// ZbIlpRefine (zb_ilp.h): the Zero Bubble scheduler's integer program, solved by CBC.
#include "stagecraft/schedules/zb_ilp.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <numeric>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "stagecraft/base/check.h"
#include "zb_passes.h"

#if STAGECRAFT_HAVE_CBC
#include <Cbc_C_Interface.h>
#endif

namespace stagecraft::schedules {
namespace {

using zb::kPassB;
using zb::kPassF;
using zb::kPassW;
using zb::PassCost;
using zb::PassMem;
using zb::PassOf;

// The passes of a step: (pass, stage, microbatch) <-> an index.
struct Nodes {
  int p, m;
  int Id(int pass, int stage, int mb) const { return (pass * p + stage) * m + mb; }
  int Pass(int id) const { return id / (p * m); }
  int Stage(int id) const { return (id / m) % p; }
  int Mb(int id) const { return id % m; }
  int Count() const { return 3 * p * m; }
};

// Of two passes of one stage, whether the dependencies put `a` before `b`: every pass of a
// kind in microbatch order, and F_j before B_k and W_k, B_j before W_k, for j <= k.
bool Precedes(const Nodes& n, int a, int b) {
  return a != b && n.Pass(a) <= n.Pass(b) && n.Mb(a) <= n.Mb(b);
}

// The inputs of a pass, each with the transfer it waits for (comm across stages, 0 within).
std::vector<std::pair<int, double>> Parents(const Nodes& n, const ZbAutoCosts& c, int id) {
  const int pass = n.Pass(id), s = n.Stage(id), j = n.Mb(id);
  std::vector<std::pair<int, double>> out;
  if (j > 0) out.emplace_back(n.Id(pass, s, j - 1), 0);
  if (pass == kPassF && s > 0) out.emplace_back(n.Id(kPassF, s - 1, j), c.comm);
  if (pass == kPassB) {
    if (s == n.p - 1) {
      out.emplace_back(n.Id(kPassF, s, j), 0);
    } else {
      out.emplace_back(n.Id(kPassB, s + 1, j), c.comm);
    }
  }
  if (pass == kPassW) out.emplace_back(n.Id(kPassB, s, j), 0);
  return out;
}

// Each pass's end when every pass starts as soon as its inputs and its stage's previous pass
// allow; empty when the orders deadlock or break a stage's own dependencies.
std::vector<double> AsapEnds(const Nodes& n, const ZbAutoCosts& c,
                             const std::vector<std::vector<std::pair<OpKind, int>>>& order) {
  std::vector<double> end(static_cast<size_t>(n.Count()), -1);
  std::vector<size_t> next(static_cast<size_t>(n.p), 0);
  std::vector<double> free_at(static_cast<size_t>(n.p), 0);
  size_t left = 0;
  for (const auto& stage : order) left += stage.size();
  if (static_cast<int>(order.size()) != n.p || static_cast<int>(left) != n.Count()) return {};
  while (left > 0) {
    bool moved = false;
    for (int s = 0; s < n.p; ++s) {
      while (next[s] < order[s].size()) {
        const auto [kind, mb] = order[s][next[s]];
        if (mb < 0 || mb >= n.m) return {};
        const int id = n.Id(PassOf(kind), s, mb);
        if (end[id] >= 0) return {};  // twice
        double start = free_at[s];
        bool ready = true;
        for (const auto& [parent, wait] : Parents(n, c, id)) {
          if (end[parent] < 0) {
            ready = false;
            break;
          }
          start = std::max(start, end[parent] + wait);
        }
        if (!ready) break;
        end[id] = start + PassCost(c, PassOf(kind), s);
        free_at[s] = end[id];
        ++next[s];
        --left;
        moved = true;
      }
    }
    if (!moved) return {};
  }
  return end;
}

double SpanOf(const Nodes& n, const ZbAutoCosts& c, const std::vector<double>& end) {
  double span = 0;
  for (int s = 0; s < n.p; ++s) {
    double last = 0;
    for (int pass = 0; pass < 3; ++pass) {
      for (int j = 0; j < n.m; ++j) last = std::max(last, end[n.Id(pass, s, j)]);
    }
    span = std::max(span, last - (end[n.Id(kPassF, s, 0)] - c.f[s]));
  }
  return span;
}

bool WithinMemory(const Nodes& n, const ZbAutoCosts& c, const std::vector<std::vector<std::pair<OpKind, int>>>& order) {
  for (int s = 0; s < n.p; ++s) {
    double held = 0;
    for (const auto& [kind, mb] : order[s]) {
      held += PassMem(c, PassOf(kind), s);
      if (held > c.max_mem[s] + 1e-9 * std::abs(c.max_mem[s])) return false;
    }
  }
  return true;
}

}  // namespace

double ZbOrderSpan(const ZbAutoCosts& costs, const std::vector<std::vector<std::pair<OpKind, int>>>& order) {
  const Nodes n{static_cast<int>(costs.f.size()), costs.microbatches};
  const std::vector<double> end = AsapEnds(n, costs, order);
  if (end.empty() || !WithinMemory(n, costs, order)) return -1;
  return SpanOf(n, costs, end);
}

int64_t ZbIlpBinaries(const ZbAutoCosts& costs) {
  const int64_t p = static_cast<int64_t>(costs.f.size()), m = costs.microbatches;
  return p * 3 * m * (m - 1) / 2;
}

#if STAGECRAFT_HAVE_CBC

bool ZbIlpAvailable() { return true; }

namespace {

// One row: coefficients by column, summed where a column comes twice.
struct Row {
  std::map<int, double> coef;
  double rhs = 0;
  void Add(int col, double v) { coef[col] += v; }
};

class Program {
 public:
  explicit Program(Cbc_Model* model) : model_(model) {}
  int Column(double lb, double ub, bool integer) {
    Cbc_addCol(model_, "", lb, ub, 0.0, integer ? 1 : 0, 0, nullptr, nullptr);
    return columns_++;
  }
  void Add(const Row& row, char sense) {
    std::vector<int> cols;
    std::vector<double> vals;
    for (const auto& [col, v] : row.coef) {
      if (v == 0) continue;
      cols.push_back(col);
      vals.push_back(v);
    }
    Cbc_addRow(model_, "", static_cast<int>(cols.size()), cols.data(), vals.data(), sense, row.rhs);
  }
  int columns() const { return columns_; }

 private:
  Cbc_Model* model_;
  int columns_ = 0;
};

struct ModelDeleter {
  void operator()(Cbc_Model* m) const { Cbc_deleteModel(m); }
};

// The program's columns: each pass's end, the span, one binary per unordered pair (x = 1: a
// before b), and for each pass the passes of its stage it is unordered with.
struct Columns {
  struct Pair {
    int a, b, col;
  };
  double big = 0;  // longer than any order's span
  std::vector<int> end_col;
  int span_col = 0;
  std::vector<Pair> pairs;
  std::vector<std::vector<std::pair<int, int>>> unordered;  // per pass: (other, pair)

  // [u before v] as coefficient on the pair's binary plus a constant.
  std::pair<double, double> Before(int pair, int u) const {
    return pairs[pair].a == u ? std::pair{1.0, 0.0} : std::pair{-1.0, 1.0};
  }
};

Columns AddColumns(const Nodes& n, const ZbAutoCosts& costs, Program& lp, Cbc_Model* model) {
  Columns c;
  c.big = costs.comm * 3 * n.p * n.m;
  for (int s = 0; s < n.p; ++s) c.big += (costs.f[s] + costs.b[s] + costs.w[s]) * n.m;
  c.end_col.resize(static_cast<size_t>(n.Count()));
  for (int id = 0; id < n.Count(); ++id) {
    c.end_col[id] = lp.Column(PassCost(costs, n.Pass(id), n.Stage(id)), c.big, false);
  }
  c.span_col = lp.Column(0, c.big, false);
  Cbc_setObjCoeff(model, c.span_col, 1.0);
  c.unordered.resize(static_cast<size_t>(n.Count()));
  for (int s = 0; s < n.p; ++s) {
    for (int pa = 0; pa < 3; ++pa) {
      for (int pb = pa + 1; pb < 3; ++pb) {
        for (int ja = 1; ja < n.m; ++ja) {
          for (int jb = 0; jb < ja; ++jb) {  // a later microbatch's earlier pass against an earlier one's later pass
            const int a = n.Id(pa, s, ja), b = n.Id(pb, s, jb);
            c.pairs.push_back({a, b, lp.Column(0, 1, true)});
            c.unordered[a].emplace_back(b, static_cast<int>(c.pairs.size()) - 1);
            c.unordered[b].emplace_back(a, static_cast<int>(c.pairs.size()) - 1);
          }
        }
      }
    }
  }
  return c;
}

// Pass `id`'s order rows: after each parent by its cost and wait, and after or before each pass
// it is unordered with.
void AddOrderRows(const Nodes& n, const ZbAutoCosts& costs, const Columns& c, int id, Program& lp) {
  const double cost = PassCost(costs, n.Pass(id), n.Stage(id));
  for (const auto& [parent, wait] : Parents(n, costs, id)) {  // end_id - end_parent >= cost + wait
    Row r;
    r.Add(c.end_col[id], 1);
    r.Add(c.end_col[parent], -1);
    r.rhs = cost + wait;
    lp.Add(r, 'G');
  }
  // Unordered: end_id - end_other >= cost - big * [id before other].
  for (const auto& [other, pair] : c.unordered[id]) {
    const auto [k, c0] = c.Before(pair, id);
    Row r;
    r.Add(c.end_col[id], 1);
    r.Add(c.end_col[other], -1);
    r.Add(c.pairs[pair].col, c.big * k);
    r.rhs = cost - c.big * c0;
    lp.Add(r, 'G');
  }
}

// Memory after pass `id`: its own, those the dependencies put before it, the unordered ones that
// run before it; within the stage's limit.
void AddMemoryRow(const Nodes& n, const ZbAutoCosts& costs, const Columns& c, int id, Program& lp) {
  const int s = n.Stage(id);
  Row mem;
  double fixed = PassMem(costs, n.Pass(id), s);
  for (int pass = 0; pass < 3; ++pass) {
    for (int j = 0; j < n.m; ++j) {
      if (Precedes(n, n.Id(pass, s, j), id)) fixed += PassMem(costs, pass, s);
    }
  }
  for (const auto& [other, pair] : c.unordered[id]) {
    const auto [k, c0] = c.Before(pair, other);
    mem.Add(c.pairs[pair].col, PassMem(costs, n.Pass(other), s) * k);
    fixed += PassMem(costs, n.Pass(other), s) * c0;
  }
  mem.rhs = costs.max_mem[s] - fixed;
  lp.Add(mem, 'L');
}

// Span: span - end_id + end_F0 - sum(cost of unordered after) >= cost of fixed after + f.
void AddSpanRow(const Nodes& n, const ZbAutoCosts& costs, const Columns& c, int id, Program& lp) {
  const int s = n.Stage(id);
  Row span;
  span.Add(c.span_col, 1);
  span.Add(c.end_col[id], -1);
  span.Add(c.end_col[n.Id(kPassF, s, 0)], 1);
  double after = costs.f[s];
  for (int pass = 0; pass < 3; ++pass) {
    for (int j = 0; j < n.m; ++j) {
      if (Precedes(n, id, n.Id(pass, s, j))) after += PassCost(costs, pass, s);
    }
  }
  for (const auto& [other, pair] : c.unordered[id]) {
    const auto [k, c0] = c.Before(pair, id);
    const double cost = PassCost(costs, n.Pass(other), s);
    span.Add(c.pairs[pair].col, -cost * k);
    after += cost * c0;
  }
  span.rhs = after;
  lp.Add(span, 'G');
}

// The heuristic's order as the program's start: its end times, span and pair order.
void SetStart(const Nodes& n, const ZbAutoOrder& start, const Columns& c, Program& lp, Cbc_Model* model) {
  std::vector<double> values(static_cast<size_t>(lp.columns()), 0);
  std::vector<int> position(static_cast<size_t>(n.Count()), 0);
  for (int s = 0; s < n.p; ++s) {
    SC_CHECK(start.order[s].size() == start.end[s].size() && static_cast<int>(start.order[s].size()) == 3 * n.m,
             "a start order of every pass of the stage with its end");
    for (size_t k = 0; k < start.order[s].size(); ++k) {
      const int id = n.Id(PassOf(start.order[s][k].first), s, start.order[s][k].second);
      values[c.end_col[id]] = start.end[s][k];
      position[id] = static_cast<int>(k);
    }
  }
  values[c.span_col] = start.span;
  for (const Columns::Pair& pr : c.pairs) values[pr.col] = position[pr.a] < position[pr.b] ? 1 : 0;
  std::vector<int> cols(static_cast<size_t>(lp.columns()));
  std::iota(cols.begin(), cols.end(), 0);
  Cbc_setMIPStartI(model, lp.columns(), cols.data(), values.data());
}

void Solve(Cbc_Model* model, const ZbIlpLimits& limits, double start_span) {
  Cbc_setLogLevel(model, 0);
  if (limits.seconds > 0) Cbc_setMaximumSeconds(model, limits.seconds);
  if (limits.nodes > 0) Cbc_setMaximumNodes(model, static_cast<int>(std::min<int64_t>(limits.nodes, 1 << 30)));
  Cbc_setParameter(model, "threads", "1");
  Cbc_setParameter(model, "timeMode", "elapsed");
  Cbc_setAllowableGap(model, 1e-9 * std::max(1.0, start_span));
  Cbc_solve(model);
}

// The solution's order (each stage's passes by their end), judged as the heuristic is: every
// pass as soon as it can run; kept in `result` when it holds and is shorter than the start.
void KeepSolution(const Nodes& n, const ZbAutoCosts& costs, const Columns& c, const double* x,
                  const ZbAutoOrder& start, ZbIlpResult* result) {
  ZbAutoOrder refined;
  refined.order.resize(n.p);
  refined.end.resize(n.p);
  for (int s = 0; s < n.p; ++s) {
    std::vector<int> ids;
    for (int pass = 0; pass < 3; ++pass) {
      for (int j = 0; j < n.m; ++j) ids.push_back(n.Id(pass, s, j));
    }
    std::sort(ids.begin(), ids.end(), [&](int a, int b) {
      return x[c.end_col[a]] != x[c.end_col[b]] ? x[c.end_col[a]] < x[c.end_col[b]] : Precedes(n, a, b);
    });
    for (int id : ids) refined.order[s].emplace_back(zb::kPassKinds[n.Pass(id)], n.Mb(id));
  }
  const std::vector<double> end = AsapEnds(n, costs, refined.order);
  if (end.empty() || !WithinMemory(n, costs, refined.order)) {
    result->status += "; its order did not hold (kept the start)";
    return;
  }
  refined.span = SpanOf(n, costs, end);
  for (int s = 0; s < n.p; ++s) {
    for (const auto& [kind, mb] : refined.order[s]) refined.end[s].push_back(end[n.Id(PassOf(kind), s, mb)]);
  }
  if (refined.span < start.span - 1e-9 * std::max(1.0, start.span)) {
    result->order = std::move(refined);
    result->improved = true;
  }
}

}  // namespace

ZbIlpResult ZbIlpRefine(const ZbAutoCosts& costs, const ZbAutoOrder& start, const ZbIlpLimits& limits) {
  const Nodes n{static_cast<int>(costs.f.size()), costs.microbatches};
  ZbIlpResult result;
  result.order = start;
  const int64_t binaries = ZbIlpBinaries(costs);
  if (binaries == 0) {
    result.optimal = true;  // one microbatch: the order is forced
    result.lower_bound = start.span;
    result.status = "nothing to order (one microbatch)";
    return result;
  }
  if (binaries > limits.max_binaries) {
    result.status = fmt::format("not refined: {} binaries, above the limit of {}", binaries, limits.max_binaries);
    return result;
  }
  std::unique_ptr<Cbc_Model, ModelDeleter> model(Cbc_newModel());
  Program lp(model.get());
  const Columns c = AddColumns(n, costs, lp, model.get());
  for (int id = 0; id < n.Count(); ++id) {
    AddOrderRows(n, costs, c, id, lp);
    AddMemoryRow(n, costs, c, id, lp);
    AddSpanRow(n, costs, c, id, lp);
  }
  SetStart(n, start, c, lp, model.get());
  Solve(model.get(), limits, start.span);
  result.optimal = Cbc_isProvenOptimal(model.get()) != 0;
  result.lower_bound = std::max(0.0, Cbc_getBestPossibleObjValue(model.get()));
  const double* x = Cbc_numberSavedSolutions(model.get()) > 0 || result.optimal ? Cbc_getColSolution(model.get())
                                                                                 : nullptr;
  const int why = Cbc_secondaryStatus(model.get());
  result.status = result.optimal ? "optimal" : why == 4 ? "stopped at the time limit" : why == 3 ? "stopped at the node limit"
                                                                                              : "stopped";
  if (x != nullptr) KeepSolution(n, costs, c, x, start, &result);
  return result;
}

#else

bool ZbIlpAvailable() { return false; }

ZbIlpResult ZbIlpRefine(const ZbAutoCosts&, const ZbAutoOrder& start, const ZbIlpLimits&) {
  ZbIlpResult result;
  result.order = start;
  result.status = "not refined: this build has no CBC (install coinor-libcbc-dev and configure again)";
  return result;
}

#endif

}  // namespace stagecraft::schedules
