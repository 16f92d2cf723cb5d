// The size of a schedule before it is built (see budget.h).
#include "stagecraft/schedules/budget.h"

#include "stagecraft/schedules/weight_policy.h"

#include <fmt/format.h>

#include <array>
#include <string>

#include "stagecraft/base/error.h"

namespace stagecraft::schedules {
namespace {

// Families that run one B per (stage, microbatch, step); every other one (the Zero Bubble
// family, DualPipe-V, and any generator not listed) is counted with an I + W pair.
constexpr std::array<std::string_view, 6> kOneBackward = {"gpipe",       "1f1b",       "pipedream",
                                                           "2bw",         "interleaved", "interleaved-overlap"};

bool OneBackward(std::string_view name) {
  for (std::string_view known : kOneBackward) {
    if (known == name) return true;
  }
  return false;
}

// Stage boundaries s -> s + 1 whose stages sit on different ranks.
double CrossingBoundaries(const GeneratorInfo& info, const GeneratorParams& p) {
  if (p.ranks < 1 || p.chunks < 1) return 0;
  const Shape shape{p.ranks, p.chunks, info.placement};
  const int64_t stages = int64_t{p.ranks} * p.chunks;
  if (info.placement == Placement::kLoop) return p.ranks > 1 ? static_cast<double>(stages - 1) : 0.0;
  double crossing = 0;  // V: the turns between chunks stay on one rank
  for (int64_t s = 0; s + 1 < stages; ++s) {
    crossing += shape.RankOf(static_cast<int>(s)) != shape.RankOf(static_cast<int>(s + 1)) ? 1 : 0;
  }
  return crossing;
}

// "98 TB": decimal units, two significant digits.
std::string ApproxBytes(double bytes) {
  constexpr std::array<std::string_view, 6> kUnits = {"bytes", "KB", "MB", "GB", "TB", "PB"};
  size_t unit = 0;
  while (bytes >= 1000 && unit + 1 < kUnits.size()) bytes /= 1000, ++unit;
  return fmt::format("{:.2g} {}", bytes, kUnits[unit]);
}

}  // namespace

SizeEstimate EstimateSize(const GeneratorInfo& info, const GeneratorParams& p) {
  const double stages = static_cast<double>(p.ranks) * p.chunks;
  const double per_step = static_cast<double>(p.microbatches);
  const double steps = p.steps;
  const double compute_per_unit = OneBackward(info.name) ? 2 : 3;
  const double step_ops = stages * steps * static_cast<double>(UpdatesPerStep(info.weights, p.microbatches));
  const double comms = 4 * CrossingBoundaries(info, p) * per_step * steps;
  SizeEstimate e;
  const double reduce_ops = p.data_parallel > 1 ? step_ops : 0;  // a REDUCE_GRAD per STEP
  e.ops = compute_per_unit * stages * per_step * steps + step_ops + reduce_ops + comms;
  e.bytes = e.ops * kBytesPerOp;
  return e;
}

SizeEstimate EstimateImportedSize(double ops_per_step, int64_t steps) {
  SizeEstimate e;
  e.ops = ops_per_step * static_cast<double>(steps);
  e.bytes = e.ops * kBytesPerOp;
  return e;
}

void CheckSize(std::string_view what, const SizeEstimate& estimate, int64_t max_ops) {
  const double limit = static_cast<double>(max_ops);
  if (estimate.ops <= limit) return;
  // Two significant digits, or as many as tell the estimate from the limit ("20000004").
  std::string ops;
  for (int digits = 2; digits <= 17; ++digits) {
    ops = fmt::format("{:.{}g}", estimate.ops, digits);
    if (ops != fmt::format("{:.{}g}", limit, digits)) break;
  }
  throw InputError(fmt::format("{}: about {} ops (about {} to simulate), above the limit of {:.2g} ops; raise it with "
                               "--max-ops N",
                               what, ops, ApproxBytes(estimate.bytes), limit));
}

std::string DescribeShape(std::string_view name, const GeneratorParams& p) {
  const std::string chunks = p.chunks > 1 ? fmt::format(" x {} chunks", p.chunks) : "";
  return fmt::format("{} with {} ranks{} x {} microbatches x {} step{}", name, p.ranks, chunks, p.microbatches, p.steps,
                     p.steps == 1 ? "" : "s");
}

}  // namespace stagecraft::schedules
