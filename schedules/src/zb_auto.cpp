// ZbAutoSchedule (zb_auto.h): the Zero Bubble heuristic, one pass at a time, stage by stage.
#include "stagecraft/schedules/zb_auto.h"

#include <algorithm>
#include <array>
#include <utility>

#include <fmt/format.h>

#include "stagecraft/base/check.h"
#include "stagecraft/schedules/zb_ilp.h"
#include "zb_passes.h"

namespace stagecraft::schedules {
namespace {

using zb::kPassB;
using zb::kPassF;
using zb::kPassW;

struct Settings {
  bool allow_bubble_before_first_b = false;
  bool prioritize_b = false;
  bool no_bubble_greedy = true;
};

// One run of the heuristic under `settings`: the state of every stage as passes are put.
class Heuristic {
 public:
  Heuristic(const ZbAutoCosts& c, Settings s)
      : c_(c), s_(s), p_(static_cast<int>(c.f.size())), m_(c.microbatches),
        count_(static_cast<size_t>(p_), {0, 0, 0}), mem_(p_, 0), end_(p_, 0), bubble_(p_, 0),
        t_(static_cast<size_t>(3 * p_ * m_), 0) {
    out_.order.resize(p_);
    out_.end.resize(p_);
  }

  // Returns false (with `why_`) when the memory limit cannot be met.
  bool Run() {
    for (int i = 0; i < m_; ++i) {
      if (i == 0 ? !WarmUp() : !Steady(i)) return false;
    }
    for (int j = 0; j < p_; ++j) {
      while (count_[j][kPassW] < m_) Put(j, kPassW);
    }
    for (int j = 0; j < p_; ++j) {
      out_.span = std::max(out_.span, T(kPassW, j, m_ - 1) - T(kPassF, j, 0) + c_.f[j]);
    }
    return true;
  }

  ZbAutoOrder Take() { return std::move(out_); }
  const std::string& why() const { return why_; }

 private:
  double Cost(int pass, int j) const { return zb::PassCost(c_, pass, j); }
  double Mem(int pass, int j) const { return zb::PassMem(c_, pass, j); }
  double& T(int pass, int j, int mb) { return t_[static_cast<size_t>((pass * p_ + j) * m_ + mb)]; }
  double MaxBubble() const { return *std::max_element(bubble_.begin(), bubble_.end()); }
  int& F(int j) { return count_[j][kPassF]; }
  int& B(int j) { return count_[j][kPassB]; }
  int& W(int j) { return count_[j][kPassW]; }

  void Put(int j, int pass) {
    const int mb = count_[j][pass];
    const double cost = Cost(pass, j);
    double end = end_[j] + cost;
    const double no_bubble = end;
    if (j > 0 && pass == kPassF) end = std::max(end, T(kPassF, j - 1, mb) + c_.comm + cost);
    if (j < p_ - 1 && pass == kPassB) end = std::max(end, T(kPassB, j + 1, mb) + c_.comm + cost);
    if (F(j) > 0) bubble_[j] += end - no_bubble;
    end_[j] = end;
    T(pass, j, mb) = end;
    mem_[j] += Mem(pass, j);
    ++count_[j][pass];
    out_.order[j].emplace_back(zb::kPassKinds[pass], mb);
    out_.end[j].push_back(end);
  }

  // W passes until the next `pass` fits the memory limit; false when none is left to run.
  bool MakeRoom(int j, int pass) {
    while (mem_[j] + Mem(pass, j) > c_.max_mem[j]) {
      if (W(j) >= B(j)) {
        why_ = fmt::format("stage {}: the memory limit {} cannot hold the next {} (at {})", j, c_.max_mem[j],
                           pass == kPassF ? "F" : "B", mem_[j]);
        return false;
      }
      Put(j, kPassW);
    }
    return true;
  }

  // W passes that end before `ready` (when the next pass's input can arrive), and one more that
  // runs past it when the bubble it would leave is no larger than the worst stage's.
  void FillBefore(int j, double ready) {
    while (W(j) < B(j) && end_[j] + Cost(kPassW, j) <= ready) Put(j, kPassW);
    if (W(j) < B(j) && end_[j] < ready) {
      if (ready - end_[j] <= MaxBubble() - bubble_[j]) {
        if (s_.no_bubble_greedy) Put(j, kPassW);
      } else {
        Put(j, kPassW);
      }
    }
  }

  // Microbatch 0: every stage's first F, then as many more F per stage as memory allows and as
  // fit before the first B comes back (fewer on a stage than on the one before it), then the
  // first B from the last stage up.
  bool WarmUp() {
    for (int j = 0; j < p_; ++j) Put(j, kPassF);
    std::vector<int> required(p_, 0);
    double last_t = 0;
    for (int j = p_ - 1; j >= 0; --j) {
      if (j == p_ - 1) {
        last_t = T(kPassF, j, 0) + Cost(kPassB, j);
        continue;
      }
      double mem = mem_[j], cost = end_[j];
      while (F(j) + required[j] < m_ && mem + Mem(kPassF, j) <= c_.max_mem[j]) {
        if (s_.allow_bubble_before_first_b ? cost + Cost(kPassF, j) > last_t + c_.comm : cost >= last_t + c_.comm) break;
        mem += Mem(kPassF, j);
        cost += Cost(kPassF, j);
        ++required[j];
      }
      last_t = std::max(cost, last_t + c_.comm) + Cost(kPassB, j);
    }
    for (int j = 1; j < p_; ++j) {
      while (required[j] > 0 && required[j] >= required[j - 1] && F(j) + required[j] < m_) --required[j];
    }
    for (int j = 0; j < p_; ++j) {
      for (int k = 0; k < required[j]; ++k) Put(j, kPassF);
    }
    for (int j = p_ - 1; j >= 0; --j) Put(j, kPassB);
    return true;
  }

  // Microbatch i > 0: which stages take one more F (a stage never more than the one after it),
  // those F with their W fillers, then every stage's B from the last up.
  bool Steady(int i) {
    std::vector<int> required(p_, 0);
    for (int j = 0; j < p_; ++j) {
      if (F(j) >= m_) continue;
      if (j + 1 < p_ && F(j) >= F(j + 1) + 2 && s_.prioritize_b) {
        const double next_plus_fw = end_[j + 1] + Cost(kPassF, j + 1) + Cost(kPassB, j + 1) + c_.comm;
        if (end_[j] >= next_plus_fw) continue;
        double w_cost = 0, mem_with_w = mem_[j] + Mem(kPassF, j);
        for (int k = 0; mem_with_w > c_.max_mem[j] && W(j) + k < B(j); ++k) {
          w_cost += Cost(kPassW, j);
          mem_with_w += Mem(kPassW, j);
        }
        if (end_[j] + Cost(kPassF, j) + w_cost <= next_plus_fw) {
          required[j] = 1;
          continue;
        }
        if (next_plus_fw - end_[j] <= MaxBubble() - bubble_[j]) continue;
      }
      required[j] = 1;
    }
    for (int j = p_ - 2; j >= 0; --j) required[j] = std::min(required[j], required[j + 1]);
    for (int j = 0; j < p_; ++j) {
      if (required[j] == 0) continue;
      if (!MakeRoom(j, kPassF)) return false;
      if (j > 0) FillBefore(j, T(kPassF, j - 1, F(j)) + c_.comm);
      Put(j, kPassF);
    }
    for (int j = p_ - 1; j >= 0; --j) {
      SC_CHECK(B(j) == i, "the heuristic puts one B per stage per microbatch");
      if (!MakeRoom(j, kPassB)) return false;
      if (j + 1 < p_) FillBefore(j, T(kPassB, j + 1, i) + c_.comm);
      if (j == 0 && F(j) == m_) {
        while (W(j) < B(j)) Put(j, kPassW);
      }
      Put(j, kPassB);
    }
    return true;
  }

  const ZbAutoCosts& c_;
  const Settings s_;
  const int p_, m_;
  std::vector<std::array<int, 3>> count_;  // per stage: F, B, W put so far
  std::vector<double> mem_, end_, bubble_;
  std::vector<double> t_;  // each pass's end, by (pass, stage, microbatch)
  ZbAutoOrder out_;
  std::string why_;
};

}  // namespace

StagePassCosts UniformPassCosts(int stages) {
  StagePassCosts c;
  c.f.assign(stages, 1);
  c.b.assign(stages, 1);
  c.w.assign(stages, 1);
  c.mem_f.assign(stages, 1);
  c.mem_b.assign(stages, -0.5);
  c.mem_w.assign(stages, -0.5);
  return c;
}

ZbAutoCosts ZbAutoLimit(ZbAutoCosts costs, double pending) {
  costs.max_mem.assign(costs.f.size(), 0);
  for (size_t j = 0; j < costs.f.size(); ++j) costs.max_mem[j] = pending * costs.mem_f[j];
  return costs;
}

std::optional<ZbAutoOrder> ZbAutoSchedule(const ZbAutoCosts& costs, std::string* why) {
  const size_t p = costs.f.size();
  SC_CHECK(p > 0 && costs.b.size() == p && costs.w.size() == p && costs.mem_f.size() == p && costs.mem_b.size() == p &&
               costs.mem_w.size() == p && costs.max_mem.size() == p && costs.microbatches > 0,
           "one cost per stage and at least one microbatch");
  std::optional<ZbAutoOrder> best;
  std::string first_why;
  // The authors' order of trying the settings; a later one must be strictly shorter to win.
  for (const bool allow_bubble : {true, false}) {
    for (const bool prioritize_b : {true, false}) {
      for (const bool greedy : {true, false}) {
        Heuristic h(costs, Settings{allow_bubble, prioritize_b, greedy});
        if (!h.Run()) {
          if (first_why.empty()) first_why = h.why();
          continue;
        }
        ZbAutoOrder order = h.Take();
        if (!best || order.span < best->span) best = std::move(order);
      }
    }
  }
  if (!best && why != nullptr) *why = first_why;
  if (best) best->heuristic_span = best->span;
  if (best && costs.refine_nodes > 0) {
    ZbIlpResult refined = ZbIlpRefine(costs, *best, ZbIlpLimits{costs.refine_nodes, 0});
    refined.order.heuristic_span = best->span;
    refined.order.refinement = fmt::format("{}: span {:.6g} (the heuristic's {:.6g}, the bound {:.6g})",
                                           refined.status, refined.order.span, best->span, refined.lower_bound);
    best = std::move(refined.order);
  }
  return best;
}

}  // namespace stagecraft::schedules
