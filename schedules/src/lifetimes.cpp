// The lifetime analysis of weight versions and stashed activations (see lifetimes.h).
#include "stagecraft/schedules/lifetimes.h"

#include <algorithm>
#include <cstddef>
#include <limits>
#include <utility>

#include "stagecraft/schedules/op_kinds.h"
#include "stagecraft/schedules/weights.h"

namespace stagecraft::schedules {
namespace {

VersionLife& LifeOf(std::vector<VersionLife>* lives, int version) {
  if (lives->size() <= static_cast<size_t>(version)) lives->resize(static_cast<size_t>(version) + 1);
  return (*lives)[static_cast<size_t>(version)];
}

// The stash intervals still open, by stage, step and microbatch; a rank holds a few at once, so a
// linear search beats a map.
class OpenIntervals {
 public:
  void Open(const Op& op, int interval) { open_.push_back({op.stage, op.step, op.microbatch, interval}); }
  // The open interval of `op`'s stage, step and microbatch; -1 when there is none.
  int Find(const Op& op) const {
    const size_t k = Position(op);
    return k < open_.size() ? open_[k].interval : -1;
  }
  // The interval `op` closes, removed from the open ones; -1 when none of its own is open.
  int Close(const Op& op) {
    const size_t k = Position(op);
    if (k == open_.size()) return -1;
    const int interval = open_[k].interval;
    open_.erase(open_.begin() + static_cast<std::ptrdiff_t>(k));
    return interval;
  }
  int size() const { return static_cast<int>(open_.size()); }

 private:
  size_t Position(const Op& op) const {
    size_t k = 0;
    while (k < open_.size() && (open_[k].stage != op.stage || open_[k].step != op.step ||
                                open_[k].microbatch != op.microbatch)) {
      ++k;
    }
    return k;
  }
  struct Entry {
    int32_t stage, step, microbatch;
    int interval;
  };
  std::vector<Entry> open_;
};

}  // namespace

ActivationLifetimes::ActivationLifetimes(const std::vector<Op>& ops)
    : activations_at_(ops.size(), -1),
      held_before_(ops.size() + 1, 0),
      resident_before_(ops.size() + 1, 0),
      resident_change_(ops.size(), 0) {
  OpenIntervals held, pending_w;
  int w_stashes = 0;  // intervals opened; only their count matters
  int resident = 0;
  // Whether an open interval's activations are on the device (an OFFLOAD not yet undone).
  const auto on_device = [this](int k) {
    const StashInterval& in = activations_[static_cast<size_t>(k)];
    return in.offloaded_at < 0 || in.reloaded_at > in.offloaded_at;
  };
  for (int i = 0; i < static_cast<int>(ops.size()); ++i) {
    const Op& op = ops[i];
    const MemoryEffect& effect = Info(op.kind).memory;
    const bool copies_activations = IsCopy(op.kind) && op.tensor == Tensor::kActivations;
    const int copied = copies_activations ? held.Find(op) : -1;
    if (copied >= 0) activations_at_[static_cast<size_t>(i)] = copied;
    if (copied >= 0 && effect.device > 0 && !on_device(copied)) {  // a RELOAD holds them from its start
      activations_[static_cast<size_t>(copied)].reloaded_at = i;
      ++resident;
      resident_change_[static_cast<size_t>(i)] = +1;
    }
    held_before_[static_cast<size_t>(i)] = held.size();
    resident_before_[static_cast<size_t>(i)] = resident;
    if (copied >= 0 && effect.device < 0 && on_device(copied)) {  // an OFFLOAD frees them at its end
      activations_[static_cast<size_t>(copied)].offloaded_at = i;
      activations_[static_cast<size_t>(copied)].reloaded_at = -1;
      --resident;
      resident_change_[static_cast<size_t>(i)] = -1;
    }
    if (effect.activations > 0) {
      held.Open(op, static_cast<int>(activations_.size()));
      activations_at_[static_cast<size_t>(i)] = static_cast<int>(activations_.size());
      activations_.push_back({i, -1});
      ++resident;
      resident_change_[static_cast<size_t>(i)] = +1;
    } else if (effect.activations < 0) {
      if (const int k = held.Close(op); k >= 0) {
        if (on_device(k)) {
          --resident;
          resident_change_[static_cast<size_t>(i)] = -1;
        }
        activations_[static_cast<size_t>(k)].closed_at = i;
        activations_at_[static_cast<size_t>(i)] = k;
      }
    }
    if (effect.w_stash > 0) {
      pending_w.Open(op, w_stashes++);
    } else if (effect.w_stash < 0) {
      pending_w.Close(op);
    }
    peak_pending_w_ = std::max(peak_pending_w_, pending_w.size());
  }
  held_before_.back() = held.size();
  resident_before_.back() = resident;
}

int ActivationLifetimes::PeakInflight(size_t count) const {
  const size_t last = std::min(count, held_before_.size() - 1);
  return *std::max_element(held_before_.begin(), held_before_.begin() + static_cast<std::ptrdiff_t>(last) + 1);
}

WeightLifetimes::WeightLifetimes(const Schedule& s, int rank) {
  const std::vector<Op>& ops = s.ops.at(static_cast<size_t>(rank));
  in_place_.assign(ops.size(), false);
  std::unordered_map<int32_t, int> newest;  // by stage
  for (int i = 0; i < static_cast<int>(ops.size()); ++i) {
    const Op& op = ops[i];
    if (op.stage < 0 || op.stage >= s.stages()) continue;
    std::vector<VersionLife>& lives = stages_[op.stage];
    if (lives.empty()) lives.resize(1);  // version 0
    if (const int read = VersionRead(op); read >= 0) {
      VersionLife& life = LifeOf(&lives, read);
      life.last_read_at = i;
      if (IsCompute(op.kind)) {
        life.last_compute_read_at = i;
        ++life.compute_readers;
      }
    }
    if (ProducesVersion(op.kind) && op.version >= 1) {
      LifeOf(&lives, op.version).produced_at = i;
      int& now = newest[op.stage];
      if (op.version > now) {
        lives[static_cast<size_t>(now)].replaced_at = i;
        now = op.version;
      }
    }
  }
  // A STEP is in place when it is the last reader of the version it updates.
  for (int i = 0; i < static_cast<int>(ops.size()); ++i) {
    const Op& op = ops[i];
    if (!ProducesVersion(op.kind) || op.stage < 0 || op.stage >= s.stages()) continue;
    const int base = VersionRead(op);
    if (base < 0) continue;
    in_place_[static_cast<size_t>(i)] = stages_.at(op.stage)[static_cast<size_t>(base)].last_read_at == i;
  }
}

const std::vector<VersionLife>& WeightLifetimes::Of(int stage) const {
  static const std::vector<VersionLife> kNone;
  const auto it = stages_.find(stage);
  return it == stages_.end() ? kNone : it->second;
}

int WeightLifetimes::PeakVersions(int stage) const {
  const std::vector<VersionLife>& lives = Of(stage);
  if (lives.empty()) return 1;
  // Positions doubled: a version replaced at a STEP (and read no more) hands over to the new one
  // at that STEP, before the STEP's own half-step.
  constexpr long kNever = std::numeric_limits<long>::max();
  std::vector<std::pair<long, int>> events;
  for (const VersionLife& life : lives) {
    const long start = life.produced_at >= 0 ? 2L * life.produced_at : -2;
    const long last_read = life.last_compute_read_at >= 0 ? 2L * life.last_compute_read_at + 1 : -1;
    const long replaced = life.replaced_at >= 0 ? 2L * life.replaced_at : kNever;
    const long stop = std::max(last_read, replaced);
    events.push_back({start, +1});
    if (stop != kNever) events.push_back({stop, -1});
  }
  std::sort(events.begin(), events.end());  // at equal time the -1 sorts first: hand-over
  int alive = 0, peak = 0;
  for (const auto& [t, delta] : events) peak = std::max(peak, alive += delta);
  return peak;
}

}  // namespace stagecraft::schedules
