// The schedule search's annealing over op orders (search_parts.h).
#include <algorithm>
#include <cmath>
#include <random>
#include <utility>
#include <vector>

#include "search_parts.h"

namespace stagecraft::harness::search_parts {

bool LocalOrderHolds(const std::vector<Op>& ops, size_t at) {
  const Op& moved = ops[at];
  if (!schedules::IsCompute(moved.kind)) return false;
  auto rank_of = [](OpKind k) {  // F, then B or I, then W
    return schedules::IsForward(k) ? 0 : schedules::Info(k).phase == schedules::Phase::kWeightBackward ? 2 : 1;
  };
  for (size_t i = 0; i < ops.size(); ++i) {
    const Op& o = ops[i];
    if (i == at || o.stage != moved.stage || o.microbatch != moved.microbatch || o.step != moved.step) continue;
    if (schedules::ProducesVersion(o.kind)) continue;
    if ((i < at) != (rank_of(o.kind) < rank_of(moved.kind))) return false;
  }
  // Before the step's STEP of its stage.
  for (size_t i = 0; i < at; ++i) {
    if (schedules::ProducesVersion(ops[i].kind) && ops[i].stage == moved.stage) return false;
  }
  return true;
}

namespace {

// One move of the annealing: one compute op to another place in its rank's list, on one rank,
// or the same (kind, microbatch) op of each rank's first stage on every rank at once (a pipeline
// changes shape on all its ranks together: a longer warm-up, a W later). Undone by Undo.
class Move {
 public:
  Move(Schedule& current, const OrderMemory& memory) : current_(current), memory_(memory) {}

  // Draws and makes a move. False when it moved nothing (the op drawn is not a compute op, or
  // the shift leaves every list); then `refused` says whether it broke a rank's local order or
  // memory limit (after which Undo restores the lists).
  bool Make(std::mt19937_64& rng, bool* refused) {
    *refused = false;
    // The shift: mostly near (1 to 4 places), sometimes far (up to 32).
    const int reach = rng() % 4 == 0 ? 32 : 4;
    const int magnitude = 1 + static_cast<int>(rng() % static_cast<uint64_t>(reach));
    shift_ = rng() % 2 == 0 ? magnitude : -magnitude;
    const bool everywhere = rng() % 3 == 0;
    touched_.clear();
    saved_.clear();
    const int ranks = current_.ranks();
    const int pick_rank = static_cast<int>(rng() % static_cast<uint64_t>(ranks));
    const std::vector<Op>& picked_ops = current_.ops[static_cast<size_t>(pick_rank)];
    const size_t pick = rng() % picked_ops.size();
    if (!schedules::IsCompute(picked_ops[pick].kind)) return false;
    const Op pattern = picked_ops[pick];
    bool ok = true;
    if (!everywhere) {
      ok = MoveOn(pick_rank, pick);
    } else {
      const int chunk = current_.shape.ChunkOf(pattern.stage);
      for (int r = 0; r < ranks && ok; ++r) {
        const std::vector<Op>& ops = current_.ops[static_cast<size_t>(r)];
        const int stage = current_.shape.StageOf(r, chunk);
        const auto it = std::find_if(ops.begin(), ops.end(), [&](const Op& o) {
          return o.kind == pattern.kind && o.stage == stage && o.microbatch == pattern.microbatch &&
                 o.step == pattern.step;
        });
        if (it != ops.end()) ok = MoveOn(r, static_cast<size_t>(it - ops.begin()));
      }
    }
    if (touched_.empty()) return false;
    *refused = !ok;
    return true;
  }

  void Undo() {
    for (size_t i = touched_.size(); i-- > 0;) current_.ops[static_cast<size_t>(touched_[i])] = std::move(saved_[i]);
  }

 private:
  bool MoveOn(int rank, size_t from) {
    std::vector<Op>& ops = current_.ops[static_cast<size_t>(rank)];
    const int to_signed = static_cast<int>(from) + shift_;
    if (to_signed < 0 || to_signed >= static_cast<int>(ops.size())) return false;
    touched_.push_back(rank);
    saved_.push_back(ops);
    const Op moving = ops[from];
    ops.erase(ops.begin() + static_cast<std::ptrdiff_t>(from));
    ops.insert(ops.begin() + to_signed, moving);
    return LocalOrderHolds(ops, static_cast<size_t>(to_signed)) && memory_.Fits(ops, rank);
  }

  Schedule& current_;
  const OrderMemory& memory_;
  int shift_ = 0;
  std::vector<int> touched_;
  std::vector<std::vector<Op>> saved_;
};

// The score: the step plus a twentieth of the ranks' mean span, so that among orders of one
// step time the search prefers those that leave the other ranks slack, a way off a plateau.
double Score(const schedules::RunRecord& rec, int64_t step_ns) {
  double spans = 0;
  for (const schedules::RankRecord& rr : rec.ranks) {
    spans += static_cast<double>(rr.last_compute_end_ns - std::max<int64_t>(rr.first_f_start_ns, 0));
  }
  return static_cast<double>(step_ns) + 0.05 * spans / static_cast<double>(rec.ranks.size());
}

}  // namespace

void Anneal(const Candidate& c, const Judge& judge, const SearchOptions& options,
            const std::function<double()>& elapsed, SearchResult* result, schedules::RunRecord* best_run) {
  std::mt19937_64 rng(options.seed);
  Schedule current = c.schedule, best = c.schedule;
  Move move(current, c.memory);
  schedules::RunRecord run;  // the move's simulation
  *best_run = c.run;
  double current_score = Score(c.run, c.step_ns);
  int64_t best_ns = c.step_ns;
  double best_score = current_score;
  const double t0 = 0.01 * static_cast<double>(c.step_ns);  // accepts a 1% loss early on
  const double budget = std::max(options.budget_seconds, 0.0);
  int64_t tried = 0;
  for (;;) {
    const double progress = options.max_evaluations > 0 ? static_cast<double>(tried) / options.max_evaluations
                                                        : (budget > 0 ? elapsed() / budget : 1.0);
    if (progress >= 1 || (options.cancel != nullptr && options.cancel->load())) break;
    ++tried;
    bool refused = false;
    if (!move.Make(rng, &refused)) continue;
    const std::optional<int64_t> ns = refused ? std::nullopt : judge.StepNs(current, c.costs, &run);
    if (!ns) {
      ++result->rejected;
      move.Undo();
      continue;
    }
    ++result->evaluations;
    const double score = Score(run, *ns);
    const double delta = score - current_score;
    const double temperature = t0 * (1 - progress);
    const double draw = std::uniform_real_distribution<double>(0, 1)(rng);
    if (delta <= 0 || (temperature > 0 && draw < std::exp(-delta / temperature))) {
      current_score = score;
      if (*ns < best_ns || (*ns == best_ns && score < best_score)) {
        if (*ns < best_ns) ++result->improvements;
        best_ns = *ns;
        best_score = score;
        best = current;
        *best_run = run;
      }
    } else {
      move.Undo();
    }
  }
  result->best = best;
  result->best_ns = best_ns;
}

}  // namespace stagecraft::harness::search_parts
