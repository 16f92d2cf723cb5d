// The recomputes `stagecraft plan` tries (plan_space.h's RecomputeChoices) and how its reports
// name them (plan.h's RecomputeLabel).
#include <algorithm>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "plan_space.h"
#include "stagecraft/base/error.h"
#include "stagecraft/sim/recompute_drops.h"

namespace stagecraft::harness {

std::string RecomputeLabel(const PlanConfig& c) {
  using M = sim::RecomputeModule;
  if (c.recompute != sim::Recompute::kSelective || c.recompute_modules == sim::RecomputeModules{M::kCoreAttn}) {
    return std::string(sim::Name(c.recompute));
  }
  // Short, for the table's column: Megatron-LM's names without their parts the set makes plain.
  constexpr std::pair<M, std::string_view> kShort[] = {{M::kCoreAttn, "attn"}, {M::kLayernorm, "ln"},
                                                       {M::kMlaUpProj, "mla"},  {M::kMoeAct, "act"},
                                                       {M::kMlp, "mlp"},        {M::kMoe, "moe"},
                                                       {M::kSharedExperts, "shared"}};
  std::string out = "sel:";
  for (const auto& [module, name] : kShort) {
    if (!c.recompute_modules.Has(module)) continue;
    if (out.size() > 4) out += '+';
    out += name;
  }
  return out;
}

}  // namespace stagecraft::harness

namespace stagecraft::harness::detail {

std::vector<RecomputeChoice> RecomputeChoices(const sim::Scenario& scenario, const std::vector<sim::Recompute>& asked) {
  using M = sim::RecomputeModule;
  const std::vector<sim::Recompute> kinds =
      asked.empty() ? std::vector<sim::Recompute>{sim::Recompute::kNone, sim::Recompute::kSelective, sim::Recompute::kFull}
                    : asked;
  std::vector<RecomputeChoice> out;
  for (const sim::Recompute kind : kinds) {
    if (kind != sim::Recompute::kSelective) {
      out.push_back({kind, {}});
      continue;
    }
    if (!scenario.model.transformer) {
      if (asked.empty()) continue;
      throw InputError("--recompute: selective recomputes the attention's softmax and dropout: it needs "
                       "model.transformer");
    }
    const sim::TransformerSpec& t = *scenario.model.transformer;
    const bool moe = t.moe.has_value();
    const auto drops = [&](M m) { return sim::RecomputeDrops(t, m); };
    // A set less the modules that drop nothing here (a scenario's may name them, as core_attn with
    // a fused attention): sets that run alike are tried once, and what is written back loads.
    const auto effective = [&](const sim::RecomputeModules& set) {
      sim::RecomputeModules out;
      for (const auto& entry : sim::kRecomputeModuleNames) {
        if (set.Has(entry.value) && drops(entry.value)) out.Add(entry.value);
      }
      return out;
    };
    sim::RecomputeModules fine;
    for (const M m : {M::kCoreAttn, M::kLayernorm, M::kMlaUpProj, M::kMoeAct}) {
      if (drops(m)) fine.Add(m);
    }
    std::vector<sim::RecomputeModules> sets = {scenario.pipeline.ModulesIfSelective(), fine};
    if (moe) {
      sim::RecomputeModules whole;  // the fine-grained set with the whole MoE layer for its activation
      for (const M m : {M::kCoreAttn, M::kLayernorm, M::kMlaUpProj}) {
        if (fine.Has(m)) whole.Add(m);
      }
      whole.Add(M::kMoe);
      sets.push_back(whole);
    }
    const size_t before = out.size();
    for (const sim::RecomputeModules& set : sets) {
      const RecomputeChoice choice{sim::Recompute::kSelective, effective(set)};
      if (!choice.modules.empty() && std::find(out.begin(), out.end(), choice) == out.end()) out.push_back(choice);
    }
    if (out.size() == before && !asked.empty()) out.push_back({kind, scenario.pipeline.ModulesIfSelective()});
  }
  return out;
}

}  // namespace stagecraft::harness::detail
