// The roofline explanation of a scenario's layer (explain.h).
#include "stagecraft/harness/explain.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "stagecraft/base/error.h"
#include "stagecraft/base/stats.h"
#include "stagecraft/sim/cost_models.h"
#include "stagecraft/sim/costs.h"
#include "stagecraft/scenario/profile.h"
#include "stagecraft/scenario/units.h"

namespace stagecraft::harness {
namespace {

using namespace stagecraft::sim;

ProfileFitResult FitProfile(const Scenario& sc, std::string_view flag) {
  const Profile& profile = *sc.model.profile;
  ProfileFitResult r;
  double* measured = r.measured_ns;
  int64_t LayerProfile::*fields[3] = {&LayerProfile::forward_ns, &LayerProfile::backward_input_ns,
                                      &LayerProfile::backward_weight_ns};
  for (int i = 0; i < 3; ++i) {
    std::vector<int64_t> values;
    for (const LayerProfile& layer : profile.layers) values.push_back(layer.*fields[i]);
    if (values.empty() || std::any_of(values.begin(), values.end(), [](int64_t v) { return v <= 0; })) {
      throw InputError(fmt::format("{}: {}: the profile {} has no blocks with F, I and W times to fit the device to",
                                   sc.path, flag, sc.model.profile_path));
    }
    measured[i] = static_cast<double>(Median(std::move(values)));
  }
  r.fit = FitRoofline(sc, measured);
  return r;
}

}  // namespace

void CheckExplainable(const Scenario& sc, std::string_view flag) {
  if (sc.model.transformer && sc.topology.roofline()) return;
  throw InputError(fmt::format("{}: {} lists the roofline model's kernels, but this scenario's costs are {} "
                               "(the roofline model needs model.transformer on a device with memory_bandwidth and "
                               "gemm, such as topology.device: A100-SXM-80GB)",
                               sc.path, flag, CostModelFor(sc).name));
}

Explanation Explain(const Scenario& sc, std::string_view flag) {
  const PipelineSpec& p = sc.pipeline;
  Explanation explanation{KernelShapeOf(sc), {}, std::nullopt};
  const GptKernelShape& shape = explanation.shape;
  std::vector<ExplainSection>& sections = explanation.sections;
  const auto section = [&](std::string id, std::string title, const std::vector<Kernel>& kernels) {
    if (kernels.empty()) return;
    ExplainSection s{std::move(id), std::move(title), TimeKernels(sc, 0, FirstRankDevice(sc), kernels)};
    for (const TimedKernel& k : s.kernels) s.pass_ns[static_cast<int>(k.kernel.pass)] += k.time.ns();
    if (p.tensor_parallel_overlap) s.overlap_saved_ns = TensorParallelOverlapNs(s.kernels);
    sections.push_back(std::move(s));
  };
  // The kinds of layer the model runs (dense or MoE, its whole past or a window): the dense and
  // the MoE block are listed whatever the model (the probes read them), a windowed one where
  // some layer runs it.
  const sim::TransformerSpec& t = *sc.model.transformer;
  bool runs[2][2] = {};  // [moe][windowed]
  for (int l = 0; l < t.layers; ++l) runs[t.IsMoeLayer(l) ? 1 : 0][t.WindowOf(l) > 0 ? 1 : 0] = true;
  const auto unused = [&](bool moe) { return runs[moe][0] ? "" : " (no layer of this model runs it)"; };
  GptKernelShape windowed = shape;
  windowed.window = t.ShorterWindow();
  const std::string within = fmt::format(" attending within its window of {}", windowed.window);
  section("block", fmt::format("one transformer block{}", unused(false)), GptBlockKernels(shape));
  if (runs[0][1]) section("windowed_block", "one transformer block" + within, GptBlockKernels(windowed));
  // "full recompute (inside I)", "selective recompute of layernorm, moe_act in it (inside I)".
  const auto recompute = [&](const char* in) {
    return p.full_recompute() ? fmt::format("full recompute{} (inside I)", in)
                              : fmt::format("selective recompute of {}{} (inside I)", p.SelectiveModules().Names(), in);
  };
  if (p.recompute != Recompute::kNone) section("recompute", recompute(""), RecomputeKernels(p, shape, false));
  if (t.moe) {  // its all-to-alls are the ALL_TO_ALL ops', not listed
    section("moe_block", fmt::format("one mixture-of-experts block{}", unused(true)), GptBlockKernels(shape, true));
    if (runs[1][1]) {
      section("windowed_moe_block", "one mixture-of-experts block" + within, GptBlockKernels(windowed, true));
    }
    if (p.recompute != Recompute::kNone) {
      section("moe_recompute", recompute(" in it"), RecomputeKernels(p, shape, true));
    }
  }
  section("embeddings", "embeddings (first stage)", GptEmbeddingKernels(shape));
  section("head", "LM head and loss (last stage)", GptHeadKernels(shape));
  // A list of every stage's layers (pipeline.partition) builds the stages it lists; else one a rank.
  const bool listed = p.partition == Partition::kGiven;
  const CostTable table = BuildCosts(sc, listed ? static_cast<int>(p.partition_layers.size()) : p.ranks);
  // What the STEP updates: the weights the device holds, or with ZeRO its share of the optimizer
  // state (the routed experts' over their holders), as the roofline table counts it.
  const double updated = UpdatedParams(sc, table.stages.front());
  section("step",
          fmt::format("optimizer step of stage 0 ({:.3g} parameters{})", updated,
                      p.zero >= 1 ? fmt::format(", its ZeRO-{} share", p.zero) : ""),
          OptimizerStepKernels(updated, shape.main_grad_bytes(), UpdateBytesPerParam(sc)));
  if (sc.model.profile) explanation.profile_fit = FitProfile(sc, flag);
  return explanation;
}

}  // namespace stagecraft::harness
