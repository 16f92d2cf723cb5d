// pipeline.recompute and pipeline.recompute_modules as the scenario states them (recompute.h).
#include <fmt/format.h>

#include "scenario_parse.h"
#include "stagecraft/scenario/recompute.h"
#include "yaml_util.h"

namespace stagecraft::sim::detail {

// pipeline.recompute: none | selective | full, or false (none) / true (full) as before.
Recompute ParseRecompute(const yaml::Value& v) {
  if (v.IsScalar() && (v.node().Scalar() == "true" || v.node().Scalar() == "false")) {
    return v.Bool() ? Recompute::kFull : Recompute::kNone;
  }
  return v.Enum(kRecomputeNames);
}

// pipeline.recompute_modules: a list of Megatron-LM's module names, each once.
RecomputeModules ParseRecomputeModules(const yaml::Value& v) {
  if (!v.IsSequence() || v.Elements().empty()) {
    v.Fail(fmt::format("expected a list of modules to recompute, e.g. [layernorm, moe_act] (known: {})",
                       RecomputeModules::All().Names()));
  }
  RecomputeModules modules;
  for (const yaml::Value& item : v.Elements()) {
    const RecomputeModule m = item.Enum(kRecomputeModuleNames);
    if (modules.Has(m)) item.Fail(fmt::format("module '{}' is listed twice", Name(m)));
    modules.Add(m);
  }
  return modules;
}

}  // namespace stagecraft::sim::detail
