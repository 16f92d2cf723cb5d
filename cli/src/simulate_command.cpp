// `stagecraft simulate`: load a scenario, simulate each of its schedules on its topology and
// print the comparison table; optionally write the metrics JSON and one trace per schedule.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "commands.h"
#include "stagecraft/harness/predict.h"
#include "command_support.h"
#include "stagecraft/base/output_file.h"
#include "stagecraft/base/printable.h"
#include "stagecraft/base/stats.h"
#include "stagecraft/base/error.h"
#include "stagecraft/schedules/metrics.h"
#include "stagecraft/schedules/json_out.h"
#include "stagecraft/schedules/metrics_json.h"
#include "stagecraft/schedules/trace.h"
#include "stagecraft/sim/costs.h"
#include "stagecraft/sim/cost_models.h"
#include "stagecraft/sim/engine.h"
#include "stagecraft/sim/gpt_kernels.h"
#include "stagecraft/sim/profile.h"
#include "stagecraft/sim/roofline.h"
#include "stagecraft/sim/scenario.h"
#include "stagecraft/sim/topology.h"
#include "stagecraft/sim/units.h"

namespace stagecraft::cli {
namespace {

using namespace stagecraft::schedules;
using namespace stagecraft::sim;

struct SimulateFlags {
  std::string scenario;
  std::vector<std::string> sets;
  std::string json_path;
  std::string trace_path;
  std::string explain_json_path;
  int64_t max_ops = 0;
  bool explain = false;
};

// With a measured profile of the same transformer: its median block against the roofline, and
// the device's GEMM and memory efficiencies that explain it (roofline.h FitRoofline).
struct ProfileFitResult {
  double measured_ns[3];  // the profile's median block: F, I, W
  RooflineFit fit;
};

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

std::string ProfileFit(const Scenario& sc, const ProfileFitResult& r) {
  const Profile& profile = *sc.model.profile;
  const double* measured = r.measured_ns;
  const RooflineFit& fit = r.fit;
  const DeviceSpec& d = sc.topology.device;
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

// `--explain`: one transformer block's kernels on pipeline rank 0's device as the roofline
// model times them (then what recompute repeats, the embeddings, the head and the optimizer
// step), each with its time, FLOPs, bytes and bound, and each pass's sum. One computation,
// printed as text (--explain) or written as JSON (--explain-json).
struct ExplainSection {
  std::string id;     // the JSON's stable name: block, recompute, embeddings, head, step
  std::string title;  // the text's
  std::vector<TimedKernel> kernels;
  double pass_ns[4] = {0, 0, 0, 0};  // by KernelPass
  // With pipeline.tensor_parallel_overlap, what a whole backward (B = I + W as one op) saves
  // by running the collectives beside the weight GEMMs; pass_ns's I and W do not subtract it.
  double overlap_saved_ns = 0;
};

// Before any work: `flag` (--explain or --explain-json) needs the roofline model's kernels.
void CheckExplainable(const Scenario& sc, std::string_view flag) {
  if (sc.model.transformer && sc.topology.device.roofline()) return;
  throw InputError(fmt::format("{}: {} lists the roofline model's kernels, but this scenario's costs are {} "
                               "(the roofline model needs model.transformer on a device with memory_bandwidth and "
                               "gemm, such as topology.device: A100-SXM-80GB)",
                               sc.path, flag, CostModelFor(sc).name));
}

struct Explanation {
  GptKernelShape shape;  // the block's (KernelShapeOf)
  std::vector<ExplainSection> sections;
  std::optional<ProfileFitResult> profile_fit;  // with model.profile
};

Explanation Explain(const Scenario& sc, std::string_view flag) {
  const PipelineSpec& p = sc.pipeline;
  Explanation explanation{KernelShapeOf(sc)};
  const GptKernelShape& shape = explanation.shape;
  std::vector<ExplainSection>& sections = explanation.sections;
  const auto section = [&](std::string id, std::string title, const std::vector<Kernel>& kernels) {
    if (kernels.empty()) return;
    ExplainSection s{std::move(id), std::move(title), TimeKernels(sc, 0, kernels)};
    for (const TimedKernel& k : s.kernels) s.pass_ns[static_cast<int>(k.kernel.pass)] += k.time.ns();
    if (p.tensor_parallel_overlap) s.overlap_saved_ns = TensorParallelOverlapNs(s.kernels);
    sections.push_back(std::move(s));
  };
  section("block", "one transformer block", GptBlockKernels(shape));
  if (p.recompute != Recompute::kNone) {
    section("recompute", p.full_recompute() ? "full recompute (inside I)" : "selective recompute (inside I)",
            GptRecomputeKernels(shape, p.full_recompute()));
  }
  section("embeddings", "embeddings (first stage)", GptEmbeddingKernels(shape));
  section("head", "LM head and loss (last stage)", GptHeadKernels(shape));
  const CostTable table = BuildCosts(sc, p.ranks);
  const double params = static_cast<double>(table.stages.front().weight_bytes) / DtypeBytes(sc.training.dtype);
  section("step",
          fmt::format("optimizer step of stage 0 ({:.3g} parameters{})", params,
                      p.zero == 1 ? fmt::format(", 1/{} of them with ZeRO-1", p.data_parallel) : ""),
          OptimizerStepKernels(p.zero == 1 ? params / p.data_parallel : params, shape.main_grad_bytes(),
                               UpdateBytesPerParam(sc)));
  if (sc.model.profile) explanation.profile_fit = FitProfile(sc, flag);
  return explanation;
}

bool IsGemm(const Kernel& kernel) { return kernel.kind == KernelClass::kGemm || kernel.kind == KernelClass::kBatchedGemm; }

std::string_view BoundName(const TimedKernel& k) {
  return k.kernel.kind == KernelClass::kCollective ? "link" : k.time.memory_bound() ? "memory" : "compute";
}

std::string ExplainText(const Scenario& sc, const Explanation& explanation) {
  const GptKernelShape& shape = explanation.shape;
  const PipelineSpec& p = sc.pipeline;
  std::string out = fmt::format(
      "kernels of one layer on {} ({} b={} s={} h={} heads={}{}{}), as the roofline model times them:\n",
      sc.topology.device.name, Name(sc.training.dtype), shape.microbatch, shape.seq, shape.hidden, shape.heads,
      p.tensor_parallel > 1 ? fmt::format(", {}-way tensor parallel", p.tensor_parallel) : "",
      p.sequence_parallel ? " (sequence parallel)" : "");
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

// The device the kernels were timed on, every field resolved (library file, inline fields and
// --set overrides applied): what scripts read instead of parsing a device file.
void DeviceJson(JsonOut& out, const Scenario& sc) {
  const DeviceSpec& d = sc.topology.device;
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
  out.EndObject();
  out.Key("memory_kernels").StartObject();
  for (const auto& [kernel, rate] : d.memory_kernel_rates) out.Key(kernel).Number(rate);
  out.EndObject().EndObject();
}

std::string ExplainJson(const Scenario& sc, const std::string& cost_source, const Explanation& explanation) {
  const GptKernelShape& shape = explanation.shape;
  JsonOut out;
  out.StartObject().Key("scenario").String(sc.name).Key("costs").String(cost_source).Key("device");
  DeviceJson(out, sc);
  out.Key("shape").StartObject().Key("microbatch").Int(shape.microbatch).Key("seq").Int(shape.seq);
  out.Key("hidden").Int(shape.hidden).Key("heads").Int(shape.heads).Key("vocab").Int(shape.vocab);
  out.Key("tensor_parallel").Int(shape.tensor_parallel).Key("sequence_parallel").Bool(shape.sequence_parallel);
  out.Key("dropout").Bool(shape.dropout).EndObject();
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

std::string Table(const Scenario& sc, const std::string& cost_source, const std::vector<harness::Prediction>& outcomes) {
  const PipelineSpec& p = sc.pipeline;
  // Beside the pipeline, the replicas and the tensor group, when there are any.
  const std::string around =
      p.world() == p.ranks
          ? ""
          : fmt::format(" x {} replica(s) x {}-way tensor parallel{} = {} devices", p.data_parallel, p.tensor_parallel,
                        p.sequence_parallel ? " (sequence parallel)" : "", p.world());
  std::string out = fmt::format("scenario {}: {} ranks{}, {} microbatches x {} samples, {} step(s); costs: {}\n",
                                Printable(sc.name), p.ranks, around, p.microbatches, p.microbatch_size, p.steps,
                                cost_source);
  // The replicas' gradient all-reduce: its algorithm and the least it takes, where longest.
  const harness::Prediction* longest = nullptr;
  for (const harness::Prediction& o : outcomes) {
    if (o.gradient_reduce && (longest == nullptr || o.gradient_reduce->alone_ns > longest->gradient_reduce->alone_ns)) {
      longest = &o;
    }
  }
  if (longest != nullptr) {
    const harness::Prediction::GradientReduce& g = *longest->gradient_reduce;
    out += fmt::format("gradient all-reduce over {} replicas, a stage's alone: up to {:.3f} ms ({}, stage {} of {})\n",
                       p.data_parallel, g.alone_ns * 1e-6, g.algorithm, g.stage, Printable(longest->metrics.schedule));
  }
  out += fmt::format("{:<12} {:>13} {:>20} {:>8} {:>24}  {}\n", "schedule", "step time", "throughput", "bubble",
                     "peak memory (worst rank)", "OOM");
  const harness::Prediction* best = nullptr;
  for (const harness::Prediction& o : outcomes) {
    const ScheduleMetrics& m = o.metrics;
    const int worst = m.WorstMemoryRank();
    out += fmt::format("{:<12} {:>10.3f} ms {:>10} samples/s {:>7.2f}% {:>14} (rank {:>2})  {}\n", Printable(m.schedule),
                       m.step_time_ms, ThroughputText(m), 100 * m.bubble_fraction,
                       FormatBytes(m.ranks_detail[worst].peak_memory_bytes), worst, m.AnyOom() ? "OOM" : "no");
    // Fastest that fits; on a tie the one that needs less memory.
    const auto peak = [](const ScheduleMetrics& x) { return x.ranks_detail[x.WorstMemoryRank()].peak_memory_bytes; };
    if (!m.AnyOom() && (best == nullptr || m.step_time_ms < best->metrics.step_time_ms ||
                        (m.step_time_ms == best->metrics.step_time_ms && peak(m) < peak(best->metrics)))) {
      best = &o;
    }
  }
  out += "busiest rank's memory by term: weights / gradients / optimizer state / activations (in flight) "
         "/ other\n";
  for (const harness::Prediction& o : outcomes) {
    const int worst = o.metrics.WorstMemoryRank();
    const harness::MemoryTerms t = harness::MemoryTermsOf(o, worst);
    out += fmt::format("{:<12} rank {:>2}: {} / {} / {} / {} ({}) / {}: {}\n", Printable(o.metrics.schedule), worst,
                       FormatBytes(t.weights), FormatBytes(t.gradients), FormatBytes(t.optimizer),
                       FormatBytes(t.activations), t.inflight, FormatBytes(t.other), t.Dominant());
  }
  if (best != nullptr && outcomes.size() > 1) {
    out += fmt::format("fastest that fits: {} ({:.3f} ms per step, bubble {:.2f}%)\n", Printable(best->metrics.schedule),
                       best->metrics.step_time_ms, 100 * best->metrics.bubble_fraction);
  } else if (best == nullptr) {
    out += "no schedule fits in device memory\n";
  }
  return out;
}

// One line when the scenario describes this machine (costs measured here, or a CPU device)
// and puts more ranks on one of its nodes than this machine has cores while giving each rank a
// device of its own: ranks sharing a core are then not modelled (pipeline.ranks_per_device is
// how to state them).
std::string SharedCoreWarning(const Scenario& sc, const std::string& cost_source) {
  const bool this_machine = cost_source.starts_with("profile:") || sc.topology.device.name.starts_with("cpu");
  const int per_node = std::min(sc.pipeline.ranks, std::max(sc.topology.devices_per_node, 1));
  const unsigned cores = std::thread::hardware_concurrency();
  if (!this_machine || cores == 0 || sc.pipeline.ranks_per_device > 1 || per_node <= static_cast<int>(cores)) {
    return "";
  }
  return fmt::format("warning: {} ranks on one node but this machine has {} cores: ranks sharing a core are not "
                     "modelled (each rank is predicted with a core of its own; pipeline.ranks_per_device states "
                     "the sharing)\n",
                     per_node, cores);
}

int Run(const SimulateFlags& f) {
  const Scenario sc = LoadScenario(f.scenario, f.sets);
  if (f.explain) CheckExplainable(sc, "--explain");
  if (!f.explain_json_path.empty()) CheckExplainable(sc, "--explain-json");
  const std::vector<std::string> names = harness::ScenarioScheduleNames(sc, true);
  harness::CheckScheduleSizes(sc.pipeline, names, f.max_ops);
  // Every output is checked before any work, and written only once everything is computed: an
  // error leaves no output behind.
  OutputSet outputs;
  const int json = f.json_path.empty() ? -1 : outputs.Add(f.json_path, "--json");
  const int explain_json = f.explain_json_path.empty() ? -1 : outputs.Add(f.explain_json_path, "--explain-json");
  const std::vector<int> traces = AddTraceOutputs(outputs, f.trace_path, names);
  const Topology topo(sc.topology);
  std::vector<harness::Prediction> outcomes;
  for (Schedule& s : harness::ScenarioSchedules(sc, names)) outcomes.push_back(harness::Predict(sc, topo, std::move(s)));
  const std::string& cost_source = outcomes.front().cost_source;
  const Explanation explanation =
      f.explain || explain_json >= 0 ? Explain(sc, f.explain ? "--explain" : "--explain-json") : Explanation{};
  const std::string explained = f.explain ? ExplainText(sc, explanation) : "";
  SetPredictedOutputs(outputs, json, traces, sc, cost_source, outcomes);
  if (explain_json >= 0) outputs.Set(explain_json, ExplainJson(sc, cost_source, explanation));
  outputs.Commit();
  if (const std::string warning = SharedCoreWarning(sc, cost_source); !warning.empty()) {
    std::fwrite(warning.data(), 1, warning.size(), stderr);
  }
  // With an output on standard output, the table goes to standard error.
  const std::string table = Table(sc, cost_source, outcomes);
  std::fwrite(table.data(), 1, table.size(), outputs.WritesStdout() ? stderr : stdout);
  std::fwrite(explained.data(), 1, explained.size(), outputs.WritesStdout() ? stderr : stdout);
  return 0;
}

}  // namespace

Command AddSimulateCommand(CLI::App& root) {
  auto flags = std::make_shared<SimulateFlags>();
  CLI::App* app = root.add_subcommand("simulate", "Predict bubble, memory and throughput of a scenario's schedules");
  app->add_option("scenario", flags->scenario, "Scenario YAML")->required();
  app->add_option("--set", flags->sets, "Override a scenario key: --set pipeline.microbatches=32 (repeatable)");
  app->add_option("--json", flags->json_path, "Write the metrics of every schedule as JSON (- for standard output)");
  app->add_option("--trace", flags->trace_path,
                  "Write a Chrome/Perfetto trace (one file per schedule when several; - for standard output)");
  app->add_flag("--explain", flags->explain,
                "Print one layer's kernels as the roofline cost model times them (time, FLOPs, bytes, bound)");
  app->add_option("--explain-json", flags->explain_json_path,
                  "Write --explain's kernels, and the device they were timed on with every field resolved, as JSON "
                  "(- for standard output)");
  AddMaxOpsOption(app, &flags->max_ops);
  return {app, [flags] { return Run(*flags); }};
}

}  // namespace stagecraft::cli
