// The lifetime analysis of weight versions (see lifetimes.h).
#include "stagecraft/schedules/lifetimes.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "stagecraft/schedules/weights.h"

namespace stagecraft::schedules {
namespace {

VersionLife& LifeOf(std::vector<VersionLife>* lives, int version) {
  if (lives->size() <= static_cast<size_t>(version)) lives->resize(static_cast<size_t>(version) + 1);
  return (*lives)[static_cast<size_t>(version)];
}

}  // namespace

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
