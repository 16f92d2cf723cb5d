// The roofline explanation's renderings: --explain's text, --explain-json's document (explain.h).
#include <string>

#include <fmt/format.h>

#include "stagecraft/base/stats.h"
#include "stagecraft/harness/explain.h"
#include "stagecraft/schedules/json_out.h"
#include "stagecraft/scenario/units.h"

namespace stagecraft::harness {
namespace {

using namespace stagecraft::schedules;
using namespace stagecraft::sim;

std::string ProfileFit(const Scenario& sc, const ProfileFitResult& r) {
  const Profile& profile = *sc.model.profile;
  const double* measured = r.measured_ns;
  const RooflineFit& fit = r.fit;
  const DeviceSpec& d = FirstRankDevice(sc);
  std::string out = fmt::format("the profile {} (measured on {}) against the roofline, one block (the median of {}):\n",
                                sc.model.profile_path, profile.device.empty() ? "?" : profile.device,
                                fmt::format("{} block{}", profile.layers.size(), profile.layers.size() == 1 ? "" : "s"));
  out += fmt::format("{:<5} {:>12} {:>22} {:>22}\n", "pass", "measured ms",
                     fmt::format("{} as stated", d.name), "fitted");
  for (int i = 0; i < 3; ++i) {
    out += fmt::format("{:<5} {:>12.3f} {:>13.3f} ({:>+6.1f}%) {:>13.3f} ({:>+6.1f}%)\n", kKernelPassNames[i].name,
                       measured[i] * 1e-6, fit.predicted_ns[i] * 1e-6, RelativeErrorPct(fit.predicted_ns[i], measured[i]).value_or(0),
                       fit.fitted_ns[i] * 1e-6, RelativeErrorPct(fit.fitted_ns[i], measured[i]).value_or(0));
  }
  out += fmt::format("fitted: gemm.max_efficiency {:.2f} (stated {:.2f}), memory_efficiency {:.2f} (stated {:.2f}): "
                     "GEMMs run at {:.2f}x and memory-bound kernels at {:.2f}x the device file's rate\n",
                     fit.gemm_efficiency, d.gemm.max_efficiency, fit.memory_efficiency, d.memory_efficiency,
                     fit.gemm_efficiency / d.gemm.max_efficiency, fit.memory_efficiency / d.memory_efficiency);
  if (fit.gemm_efficiency > 1 || fit.memory_efficiency > 1) {
    out += fmt::format("note: a fitted efficiency above 1 says the device's stated {} is below what the profile shows\n",
                       fit.gemm_efficiency > 1 ? "peak" : "memory_bandwidth");
  }
  return out;
}

bool IsGemm(const Kernel& kernel) { return kernel.kind == KernelClass::kGemm || kernel.kind == KernelClass::kBatchedGemm; }

std::string_view BoundName(const TimedKernel& k) {
  return k.kernel.kind == KernelClass::kCollective ? "link" : k.time.memory_bound() ? "memory" : "compute";
}

// The device the kernels were timed on (pipeline rank 0's), every field resolved (library file, inline fields and
// --set overrides applied): what scripts read instead of parsing a device file.
void DeviceJson(JsonOut& out, const Scenario& sc) {
  const DeviceSpec& d = FirstRankDevice(sc);
  out.StartObject().Key("name").String(d.name).Key("source").String(d.source);
  out.Key("dtype").String(Name(sc.training.dtype)).Key("peak_flops").Number(d.peak_flops);
  out.Key("peak_flops_by_dtype").StartObject();
  for (const EnumName<Dtype>& dtype : kDtypeNames) {
    if (const double peak = d.peak_by_dtype[static_cast<int>(dtype.value)]; peak > 0) out.Key(dtype.name).Number(peak);
  }
  out.EndObject();
  out.Key("memory_bytes").Int(d.memory_bytes).Key("memory_bandwidth_bytes_per_s").Number(d.memory_bandwidth);
  out.Key("memory_efficiency").Number(d.memory_efficiency).Key("launch_overhead_ns").Int(d.launch_overhead_ns);
  out.Key("efficiency").Number(d.efficiency).Key("time_slice_ns").Int(d.time_slice_ns);
  const GemmModel& g = d.gemm;
  out.Key("gemm").StartObject().Key("max_efficiency").Number(g.max_efficiency).Key("sms").Int(g.sms);
  out.Key("tiles").StartArray();
  for (const auto& [m, n] : g.tiles) out.StartArray().Int(m).Int(n).EndArray();
  out.EndArray().Key("k_overhead").Number(g.k_overhead).Key("batched_efficiency").Number(g.batched_efficiency);
  if (g.blockwise_max_efficiency > 0) {
    out.Key("fp8_blockwise").StartObject().Key("max_efficiency").Number(g.blockwise_max_efficiency);
    out.Key("k_overhead").Number(g.blockwise_k_overhead).EndObject();
  }
  out.EndObject();
  out.Key("memory_kernels").StartObject();
  for (const auto& [kernel, rate] : d.memory_kernel_rates) out.Key(kernel).Number(rate);
  out.EndObject().EndObject();
}

}  // namespace

std::string ExplainText(const Scenario& sc, const Explanation& explanation) {
  const GptKernelShape& shape = explanation.shape;
  const PipelineSpec& p = sc.pipeline;
  std::string out = fmt::format(
      "kernels of one layer on {} ({} b={} s={} h={} heads={}{}{}{}), as the roofline model times them:\n",
      FirstRankDevice(sc).name, Name(sc.training.dtype), shape.microbatch, shape.seq, shape.hidden, shape.heads,
      p.tensor_parallel > 1 ? fmt::format(", {}-way tensor parallel", p.tensor_parallel) : "",
      p.sequence_parallel ? " (sequence parallel)" : "",
      p.context_parallel > 1 ? fmt::format(", {}-way context parallel: s of {}", p.context_parallel,
                                           shape.seq * p.context_parallel)
                             : "");
  out += fmt::format("{:<5} {:<34} {:>10} {:>12} {:>12}  {:<10} {}\n", "pass", "kernel", "time us", "GFLOP", "MB",
                     "bound", "shape");
  for (const ExplainSection& s : explanation.sections) {
    out += fmt::format("-- {}\n", s.title);
    for (const TimedKernel& k : s.kernels) {
      const Kernel& kernel = k.kernel;
      const std::string dims = IsGemm(kernel) ? fmt::format("{} x {} x {}{}", kernel.m, kernel.n, kernel.k,
                                                            kernel.batch > 1 ? fmt::format(" x{}", kernel.batch) : "")
                                              : "";
      out += fmt::format("{:<5} {:<34} {:>10.1f} {:>12.3f} {:>12.2f}  {:<10} {}\n", Name(kernel.pass), kernel.name,
                         k.time.ns() * 1e-3, kernel.flops * 1e-9, kernel.bytes * 1e-6, BoundName(k), dims);
    }
    std::string total;
    for (const EnumName<KernelPass>& pass : kKernelPassNames) {
      if (const double ns = s.pass_ns[static_cast<int>(pass.value)]; ns > 0) {
        total += fmt::format("{}{} {:.3f} ms", total.empty() ? "" : ", ", pass.name, ns * 1e-6);
      }
    }
    out += fmt::format("   {}: {}\n", s.title, total);
    if (s.overlap_saved_ns > 0) {
      const double whole = s.pass_ns[static_cast<int>(KernelPass::kI)] + s.pass_ns[static_cast<int>(KernelPass::kW)] -
                           s.overlap_saved_ns;
      out += fmt::format("   {}: a whole backward B (I + W) {:.3f} ms, its collectives beside the weight GEMMs "
                         "hiding {:.3f} ms (pipeline.tensor_parallel_overlap)\n",
                         s.title, whole * 1e-6, s.overlap_saved_ns * 1e-6);
    }
  }
  if (explanation.profile_fit) out += ProfileFit(sc, *explanation.profile_fit);
  return out;
}

std::string ExplainJson(const Scenario& sc, const std::string& cost_source, const Explanation& explanation) {
  const GptKernelShape& shape = explanation.shape;
  JsonOut out;
  out.StartObject().Key("scenario").String(sc.name).Key("costs").String(cost_source).Key("device");
  DeviceJson(out, sc);
  out.Key("shape").StartObject().Key("microbatch").Int(shape.microbatch).Key("seq").Int(shape.seq);
  out.Key("hidden").Int(shape.hidden).Key("heads").Int(shape.heads).Key("vocab").Int(shape.vocab);
  out.Key("tensor_parallel").Int(shape.tensor_parallel).Key("sequence_parallel").Bool(shape.sequence_parallel);
  out.Key("dropout").Bool(shape.dropout);
  if (shape.context_parallel > 1) {  // seq above is each device's s / C
    out.Key("context_parallel").Int(shape.context_parallel).Key("sequence").Int(shape.seq * shape.context_parallel);
    out.Key("context_parallel_comm").String(shape.context_all_gather ? "all_gather" : "p2p");
  }
  out.EndObject();
  out.Key("sections").StartArray();
  for (const ExplainSection& s : explanation.sections) {
    out.StartObject().Key("id").String(s.id).Key("title").String(s.title).Key("kernels").StartArray();
    for (const TimedKernel& k : s.kernels) {
      const Kernel& kernel = k.kernel;
      out.StartObject().Key("pass").String(Name(kernel.pass)).Key("name").String(kernel.name);
      out.Key("class").String(Name(kernel.kind)).Key("bound").String(BoundName(k));
      out.Key("time_us").Number(k.time.ns() * 1e-3).Key("compute_us").Number(k.time.compute_ns * 1e-3);
      out.Key("memory_us").Number(k.time.memory_ns * 1e-3).Key("link_us").Number(k.time.link_ns * 1e-3);
      out.Key("launch_us").Number(k.time.launch_ns * 1e-3);
      out.Key("flops").Number(kernel.flops).Key("bytes").Number(kernel.bytes);
      if (IsGemm(kernel)) out.Key("m").Int(kernel.m).Key("n").Int(kernel.n).Key("k").Int(kernel.k).Key("batch").Int(kernel.batch);
      out.EndObject();
    }
    out.EndArray().Key("pass_ms").StartObject();
    for (const EnumName<KernelPass>& pass : kKernelPassNames) {
      out.Key(pass.name).Number(s.pass_ns[static_cast<int>(pass.value)] * 1e-6);
    }
    out.EndObject();
    if (sc.pipeline.tensor_parallel_overlap) out.Key("overlap_saved_ms").Number(s.overlap_saved_ns * 1e-6);
    out.EndObject();
  }
  out.EndArray();
  if (const std::optional<ProfileFitResult>& r = explanation.profile_fit) {
    const Profile& profile = *sc.model.profile;
    out.Key("profile_fit").StartObject().Key("profile").String(sc.model.profile_path);
    out.Key("measured_on").String(profile.device).Key("blocks").Int(static_cast<int64_t>(profile.layers.size()));
    out.Key("passes").StartArray();
    for (int i = 0; i < 3; ++i) {
      out.StartObject().Key("pass").String(kKernelPassNames[i].name).Key("measured_ms").Number(r->measured_ns[i] * 1e-6);
      out.Key("predicted_ms").Number(r->fit.predicted_ns[i] * 1e-6).Key("fitted_ms").Number(r->fit.fitted_ns[i] * 1e-6);
      out.EndObject();
    }
    out.EndArray().Key("gemm_max_efficiency").Number(r->fit.gemm_efficiency);
    out.Key("memory_efficiency").Number(r->fit.memory_efficiency).EndObject();
  }
  return out.EndObject().Take() + "\n";
}


}  // namespace stagecraft::harness
