// `simulate --explain`: one transformer block's kernels on pipeline rank 0's device as the
// roofline model times them (then what recompute repeats, the embeddings, the head and the
// optimizer step), each with its time, FLOPs, bytes and bound, and each pass's sum; with a
// measured profile of the same transformer, its median block against the roofline and the
// device efficiencies that explain it (sim/roofline.h FitRoofline). One computation, rendered
// as text or as JSON (docs/cost-model.md).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "stagecraft/sim/gpt_kernels.h"
#include "stagecraft/sim/roofline.h"
#include "stagecraft/scenario/scenario.h"

namespace stagecraft::harness {

// The profile's median block (F, I, W) and the roofline fitted to it.
struct ProfileFitResult {
  double measured_ns[3];  // the profile's median block: F, I, W
  sim::RooflineFit fit;
};

struct ExplainSection {
  std::string id;     // the JSON's stable name: block, recompute, embeddings, head, step
  std::string title;  // the text's
  std::vector<sim::TimedKernel> kernels;
  double pass_ns[4] = {0, 0, 0, 0};  // by KernelPass
  // With pipeline.tensor_parallel_overlap, what a whole backward (B = I + W as one op) saves
  // by running the collectives beside the weight GEMMs; pass_ns's I and W do not subtract it.
  double overlap_saved_ns = 0;
};

struct Explanation {
  sim::GptKernelShape shape;  // the block's (KernelShapeOf)
  std::vector<ExplainSection> sections;
  std::optional<ProfileFitResult> profile_fit;  // with model.profile
};

// Before any work: `flag` (--explain or --explain-json) needs the roofline model's kernels;
// throws InputError naming the scenario and the flag otherwise.
void CheckExplainable(const sim::Scenario& scenario, std::string_view flag);

// The explanation of `scenario` (CheckExplainable first). With model.profile, a profile without
// F, I and W times throws InputError naming `flag`.
Explanation Explain(const sim::Scenario& scenario, std::string_view flag);

// --explain's table, and --explain-json's document (with the device the kernels were timed on,
// every field resolved: what scripts read instead of parsing a device file).
std::string ExplainText(const sim::Scenario& scenario, const Explanation& explanation);
std::string ExplainJson(const sim::Scenario& scenario, const std::string& cost_source, const Explanation& explanation);

}  // namespace stagecraft::harness
