// ZB-1p, ZB-2p and ZB-auto (Qi et al., ICLR 2024, §3 and Table 5): the automatic scheduler's
// heuristic (zb_auto.h) under a memory limit of p and 2p forwards' activations, or of the
// scenario's memory (the costs' max_mem: pipeline.memory_limit), from the stages' own
// F, B (I), W and transfer times when the harness has them (GeneratorParams::costs), else every
// stage alike. One step's order, repeated every step.
#include <fmt/format.h>

#include "emit_util.h"
#include "stagecraft/base/error.h"
#include "stagecraft/base/format.h"
#include "stagecraft/schedules/generators.h"
#include "stagecraft/schedules/zb_auto.h"

namespace stagecraft::schedules {
namespace {

std::vector<std::vector<Op>> EmitUnder(const GeneratorParams& p, double pending, std::string_view name) {
  ZbAutoCosts costs;
  static_cast<StagePassCosts&>(costs) = p.costs ? *p.costs : UniformPassCosts(p.ranks);
  costs.microbatches = p.microbatches;
  costs.refine_nodes = p.zb_refine_nodes;
  std::string why;
  // pending < 0: the costs' own limit.
  const std::optional<ZbAutoOrder> order =
      ZbAutoSchedule(pending < 0 ? costs : ZbAutoLimit(costs, pending * p.ranks), &why);
  if (!order) throw InputError(fmt::format("{}: {}", name, why));
  std::vector<std::vector<Op>> out(p.ranks);
  for (int step = 0; step < p.steps; ++step) {
    for (int r = 0; r < p.ranks; ++r) {
      for (const auto& [kind, mb] : order->order[r]) out[r].push_back(detail::Compute(kind, r, mb, step));
    }
  }
  return out;
}

}  // namespace

std::string CheckZbAuto(const GeneratorParams& p) {
  if (!p.costs) return {};
  const StagePassCosts& c = *p.costs;
  for (const std::vector<double>* per_stage : {&c.f, &c.b, &c.w, &c.mem_f, &c.mem_b, &c.mem_w}) {
    if (static_cast<int>(per_stage->size()) != p.ranks) {
      return fmt::format("the costs name {} stages, not one per rank ({})", per_stage->size(), p.ranks);
    }
  }
  return {};
}

std::vector<std::vector<Op>> EmitZb1p(const GeneratorParams& p) { return EmitUnder(p, 1, "zb-1p"); }
std::vector<std::vector<Op>> EmitZbAuto(const GeneratorParams& p) {
  // The costs' own limit (the scenario's memory); without one, no limit (every forward may run
  // before the first backward).
  if (p.costs && !p.costs->max_mem.empty()) {
    // The harness's limit is in bytes: say plainly when a stage has no room for one forward.
    for (size_t j = 0; j < p.costs->max_mem.size() && j < p.costs->mem_f.size(); ++j) {
      const double left = p.costs->max_mem[j], one = p.costs->mem_f[j];
      if (left < one) {
        throw InputError(fmt::format(
            "zb-auto: stage {} has {} left under the memory limit after its weights, gradients, optimizer "
            "state and buffers, less than one forward's activations ({}); raise pipeline.memory_limit",
            j, left > 0 ? FormatBytes(static_cast<int64_t>(left)) : "nothing", FormatBytes(static_cast<int64_t>(one))));
      }
    }
    return EmitUnder(p, -1, "zb-auto");
  }
  return EmitUnder(p, static_cast<double>(p.microbatches) / p.ranks, "zb-auto");
}
std::vector<std::vector<Op>> EmitZb2p(const GeneratorParams& p) { return EmitUnder(p, 2, "zb-2p"); }

}  // namespace stagecraft::schedules
