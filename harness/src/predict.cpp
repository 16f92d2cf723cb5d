// Schedule selection and prediction (see predict.h).
#include "stagecraft/base/format.h"
#include "stagecraft/harness/predict.h"
#include "stagecraft/harness/search.h"
#include "job_copies.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <cstdio>
#include <iterator>
#include <utility>

#include <fmt/format.h>

#include "stagecraft/base/check.h"
#include "stagecraft/base/error.h"
#include "stagecraft/base/input_file.h"
#include "stagecraft/base/printable.h"
#include "stagecraft/base/stop.h"
#include "stagecraft/schedules/all_to_all.h"
#include "stagecraft/schedules/analysis.h"
#include "stagecraft/schedules/budget.h"
#include "stagecraft/schedules/csv_io.h"
#include "stagecraft/schedules/generators.h"
#include "stagecraft/schedules/lower.h"
#include "stagecraft/schedules/tensors.h"
#include "stagecraft/schedules/validate.h"
#include "stagecraft/schedules/weight_policy.h"
#include "stagecraft/schedules/zb_auto.h"
#include "stagecraft/sim/collective_streams.h"
#include "stagecraft/sim/collectives.h"
#include "stagecraft/sim/compute_streams.h"
#include "stagecraft/sim/stash.h"
#include "stagecraft/sim/costs.h"
#include "stagecraft/sim/memory_model.h"
#include "stagecraft/sim/engine.h"
#include "stagecraft/sim/topology.h"
#include "stagecraft/scenario/units.h"

namespace stagecraft::harness {

using namespace stagecraft::schedules;

namespace {

// A schedule file of the scenario: one step of its order, run `steps` times, its stages per
// rank and placement inferred, lowered unless the file carries its transfers. `path` names the
// text in messages.
Schedule ImportScheduleText(const sim::PipelineSpec& p, const std::string& name, const std::string& text,
                            const std::string& path, int steps) {
  CsvImportOptions options;
  options.name = name;
  options.chunks = 0;
  options.microbatches = p.microbatches;
  options.steps = steps;
  options.repeat_one_step = true;
  Schedule s = ImportCsv(text, path, options);
  if (s.ranks() != p.ranks) {
    throw InputError(fmt::format("{}: {} rows (ranks), but pipeline.ranks is {}", path, s.ranks(), p.ranks));
  }
  // The scenario's replicas: a REDUCE_GRAD before every STEP, placed by the lowering or, in a
  // file that carries its transfers, among them; metrics count the replicas' samples.
  s.data_parallel = p.replicas();
  s = s.lowered ? PlaceReduceGrads(s) : Lower(s, p.p2p, p.p2p_buffers);
  if (const auto diags = Validate(s); !diags.empty()) {
    throw InputError(fmt::format("{}: not a valid schedule for {} microbatches: {}", path, p.microbatches,
                                 SummarizeDiagnostics(diags)));
  }
  return s;
}

Schedule ImportScheduleFile(const sim::PipelineSpec& p, const std::string& name, const std::string& path,
                            int steps) {
  return ImportScheduleText(p, name, ReadInputFile(path, kMaxCsvBytes, "a schedule CSV"), path, steps);
}

// `auto`'s size before it is searched: its start is one of the flush-policy generators that
// take the shape, and the search keeps the start's ops, so the largest of theirs.
SizeEstimate SearchedSizeEstimate(const sim::PipelineSpec& p) {
  SizeEstimate largest;
  for (const GeneratorInfo& info : Generators()) {
    if (!TrainsAsSequential(info.weights)) continue;
    const GeneratorParams params = sim::GeneratorParamsFor(p, info);
    if (!CheckParams(info, params).empty()) continue;
    const SizeEstimate e = EstimateSize(info, params);
    if (e.ops > largest.ops) largest = e;
  }
  return largest;
}

}  // namespace

std::vector<std::string> ScenarioScheduleNames(const sim::Scenario& sc, bool report_skipped) {
  const sim::PipelineSpec& p = sc.pipeline;
  if (p.schedules.size() != 1 || p.schedules[0] != "all") return p.schedules;
  std::vector<std::string> names;
  for (const auto& info : Generators()) {
    if (info.uses_costs || !info.in_all) continue;  // named, not in "all" (generators.h)
    const std::string why = CheckParams(info, sim::GeneratorParamsFor(p, info));
    if (why.empty()) names.emplace_back(info.name);
    else if (report_skipped) std::fprintf(stderr, "note: skipping %s\n", why.c_str());  // why names the schedule
  }
  if (names.empty()) throw InputError(fmt::format("{}: no schedule can take this pipeline shape", sc.path));
  return names;
}

void CheckScheduleSizes(const sim::PipelineSpec& p, const std::vector<std::string>& names, int64_t max_ops) {
  SizeEstimate total;
  for (const std::string& name : names) {
    SizeEstimate one;
    if (name == sim::kSearchedSchedule) {
      one = SearchedSizeEstimate(p);
      CheckSize(fmt::format("{} (searched from a generator of the same shape)", name), one, max_ops);
    } else if (const auto file = p.schedule_files.find(name); file != p.schedule_files.end()) {
      // The file's one step, counted once (its size is bounded by the CSV limit), then repeated.
      const Schedule step = ImportScheduleFile(p, name, file->second, 1);
      one = EstimateImportedSize(static_cast<double>(step.OpCount()), p.steps);
      CheckSize(fmt::format("{} x {} steps", Printable(file->second), p.steps), one, max_ops);
    } else {
      const GeneratorInfo* info = FindGenerator(name);
      SC_CHECK(info != nullptr, "LoadScenario rejects unknown schedules");
      const GeneratorParams params = sim::GeneratorParamsFor(p, *info);
      one = EstimateSize(*info, params);
      CheckSize(DescribeShape(info->name, params), one, max_ops);
    }
    total += one;
  }
  if (names.size() > 1) CheckSize(fmt::format("the scenario's {} schedules together", names.size()), total, max_ops);
}

bool HasSizes(const sim::CostTable& costs) {
  return std::all_of(costs.stages.begin(), costs.stages.end(),
                     [](const sim::StageCost& s) { return s.activation_bytes > 0; });
}

int64_t OrderIndependentBytes(const sim::Scenario& sc, const sim::StageCost& s) {
  return s.weight_bytes + s.grad_bytes + s.optimizer_bytes + s.BackwardWorkspace() +
         2 * sc.pipeline.p2p_buffers * s.send_bytes;
}

schedules::StagePassCosts PassCostsFor(const sim::Scenario& sc, const GeneratorParams& params) {
  GeneratorParams plain = params;
  plain.costs = nullptr;
  const Schedule placeholder = Lower(Generate("zb-h1", plain), sc.pipeline.p2p, sc.pipeline.p2p_buffers);
  return PassCostsFor(sc, sim::BuildCosts(sc, placeholder), sim::Topology(sc.topology));
}

schedules::StagePassCosts PassCostsFor(const sim::Scenario& sc, const sim::CostTable& table, const sim::Topology& topo) {
  const int stages = static_cast<int>(table.stages.size());
  schedules::StagePassCosts c = schedules::UniformPassCosts(stages);
  const bool sized = HasSizes(table);
  for (int j = 0; j < stages; ++j) {
    const sim::StageCost& s = table.stages[j];
    c.f[j] = static_cast<double>(s.forward_ns);
    c.b[j] = static_cast<double>(s.backward_input_ns);
    c.w[j] = static_cast<double>(s.backward_weight_ns);
    if (sized) {
      c.mem_f[j] = static_cast<double>(s.activation_bytes);
      c.mem_b[j] = static_cast<double>(s.w_stash_bytes - s.activation_bytes);
      c.mem_w[j] = -static_cast<double>(s.w_stash_bytes);
    }
  }
  // zb-auto's limit per stage: the rank's memory less what it holds whatever the order (weights,
  // gradients, optimizer state, the largest op's workspace); only with the model's sizes.
  if (sized) {
    c.max_mem.assign(stages, 0);
    for (int j = 0; j < stages; ++j) {  // stage j on rank j (as below)
      c.max_mem[j] = static_cast<double>(sim::RankMemoryLimit(sc, j) - OrderIndependentBytes(sc, table.stages[j]));
    }
  }
  for (int j = 0; j + 1 < stages; ++j) {  // stage j on rank j (the generators run one stage per rank)
    const int from = sc.pipeline.DeviceOf(j), to = sc.pipeline.DeviceOf(j + 1);
    const double bytes = static_cast<double>(table.stages[j].send_bytes);
    double ns = 0;
    if (table.p2p) {
      ns = static_cast<double>(table.p2p->latency_ns) + bytes * 1e9 / table.p2p->DataBytesPerS();
    } else {
      const double bandwidth = topo.RouteBandwidth(from, to);
      ns = static_cast<double>(topo.RouteLatencyNs(from, to) + table.p2p_latency_ns) +
           (std::isfinite(bandwidth) && bandwidth > 0 ? bytes * 1e9 / bandwidth : 0);
    }
    c.comm = std::max(c.comm, ns);
  }
  return c;
}

namespace {

std::vector<Schedule> BuildPlainSchedules(const sim::PipelineSpec& p, const std::vector<std::string>& names,
                                          const sim::Scenario* costs_from, const std::atomic<bool>* cancel);

std::vector<Schedule> BuildSchedules(const sim::PipelineSpec& p, const std::vector<std::string>& names,
                                     const sim::Scenario* costs_from, const std::atomic<bool>* cancel) {
  std::vector<Schedule> out = BuildPlainSchedules(p, names, costs_from, cancel);
  for (Schedule& s : out) s = detail::WithCopies(p, std::move(s), costs_from, cancel);
  return out;
}

std::vector<Schedule> BuildPlainSchedules(const sim::PipelineSpec& p, const std::vector<std::string>& names,
                                          const sim::Scenario* costs_from, const std::atomic<bool>* cancel) {
  std::vector<Schedule> out;
  for (const std::string& name : names) {
    if (const auto file = p.schedule_files.find(name); file != p.schedule_files.end()) {
      out.push_back(ImportScheduleFile(p, name, file->second, p.steps));
      continue;
    }
    if (name == sim::kSearchedSchedule) {
      // The search's one step, as `stagecraft search` writes it and a schedule file reads, so
      // `auto` runs exactly what the CSV of the same search would.
      if (costs_from == nullptr) throw InputError(fmt::format("schedule '{}' is made from the scenario's costs", name));
      SearchOptions options;
      options.max_evaluations = p.search_evaluations;
      options.cancel = cancel;
      const SearchResult searched = SearchSchedule(*costs_from, options);
      out.push_back(ImportScheduleText(p, name, ExportCsv(searched.best, CsvForm::kComputeOnly),
                                       fmt::format("{} (searched from {})", costs_from->path, searched.start_name),
                                       p.steps));
      continue;
    }
    const GeneratorInfo* info = FindGenerator(name);
    SC_CHECK(info != nullptr, "LoadScenario rejects unknown schedules");
    GeneratorParams params = sim::GeneratorParamsFor(p, *info);
    if (info->uses_costs && costs_from != nullptr) {
      params.costs = std::make_shared<const schedules::StagePassCosts>(PassCostsFor(*costs_from, params));
    }
    const Schedule generated = Generate(info->name, params, cancel);
    ThrowIfStopped(cancel);
    Schedule s = Lower(generated, p.p2p, p.p2p_buffers, cancel);
    const auto diags = Validate(s, cancel);
    SC_CHECK(diags.empty(), diags.empty() ? "" : diags.front().message);
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace

std::vector<Schedule> ScenarioSchedules(const sim::PipelineSpec& p, const std::vector<std::string>& names) {
  return BuildSchedules(p, names, nullptr, nullptr);
}

std::vector<Schedule> ScenarioSchedules(const sim::Scenario& sc, const std::vector<std::string>& names,
                                        const std::atomic<bool>* cancel) {
  return BuildSchedules(sc.pipeline, names, &sc, cancel);
}

namespace {

// What a node's ranks hold in its host memory at once must fit there: a schedule whose copies
// do not is no run at all.
void RefuseHostOverflow(const sim::Scenario& sc, const Prediction& p) {
  const std::vector<int64_t>& peaks = p.result.node_peak_host_memory_bytes;
  for (size_t node = 0; node < peaks.size(); ++node) {
    if (peaks[node] <= sc.topology.host.memory_bytes) continue;
    throw InputError(fmt::format(
        "{}: topology.host.memory: {} holds up to {} at once in node {}'s host memory (its ranks' offloaded "
        "tensors), more than the {} stated; offload less (pipeline.offload) or state more host memory",
        sc.path, p.schedule.name, FormatBytes(peaks[node]), node, FormatBytes(sc.topology.host.memory_bytes)));
  }
}

}  // namespace

bool CopiesHoldCompute(const sim::Scenario& scenario) {
  return !scenario.topology.DeviceAt(scenario.pipeline.DeviceOf(0)).copy_engine;
}

double ModelTflopsPerDevice(const sim::Scenario& sc, const schedules::Schedule& schedule, double step_time_ms) {
  const double samples = static_cast<double>(schedule.microbatches) * sc.pipeline.microbatch_size *
                         schedule.data_parallel / sc.pipeline.context_parallel;
  double flops = 0;  // of one step
  if (const auto& t = sc.model.transformer) {
    flops = sim::TransformerModelFlopsPerToken(*t) * samples * t->seq;
  } else if (const auto& m = sc.model.mlp) {
    flops = sim::MlpModelFlopsPerSample(*m) * samples;
  }
  if (flops <= 0 || step_time_ms <= 0) return 0;
  return flops / (step_time_ms * 1e-3) / static_cast<double>(sc.pipeline.devices()) / 1e12;
}

Prediction Predict(const sim::Scenario& sc, const sim::Topology& topo, Schedule schedule,
                   const std::atomic<bool>* stop) {
  ThrowIfStopped(stop);
  sim::CostTable costs = sim::BuildCosts(sc, schedule);
  return Predict(sc, topo, std::move(schedule), std::move(costs), stop);
}

Prediction Predict(const sim::Scenario& sc, const sim::Topology& topo, Schedule schedule, sim::CostTable costs_in,
                   const std::atomic<bool>* stop) {
  Prediction p;
  p.schedule = std::move(schedule);
  p.costs = std::move(costs_in);
  // Expert parallelism: an ALL_TO_ALL after each F, B and I of a stage with MoE layers.
  std::vector<bool> expert_stages;
  for (const sim::StageCost& c : p.costs.stages) expert_stages.push_back(c.a2a_forward > 0 || c.a2a_backward > 0);
  if (std::find(expert_stages.begin(), expert_stages.end(), true) != expert_stages.end()) {
    p.schedule = PlaceAllToAlls(p.schedule, expert_stages);
  }
  const sim::CostTable& costs = p.costs;
  p.cost_source = costs.source;
  sim::SimConfig config;
  config.rank_memory_bytes = sim::RankDeviceMemories(sc);
  config.rank_devices = sc.pipeline.RankDevices();
  config.time_slice_ns = sim::TimeSliceNs(sc);
  config.copies_hold_compute = CopiesHoldCompute(sc);
  config.replica_devices = sc.pipeline.ReplicaDevices();
  config.expert_devices = sc.pipeline.ExpertDevices();
  config.stop = stop;
  // The collectives' plans, once: the engine runs them and the table names the longest.
  const sim::CollectivePlans plans(p.schedule, costs, topo, config.replica_devices, config.expert_devices);
  p.result = sim::Simulate(p.schedule, costs, topo, config, plans);
  RefuseHostOverflow(sc, p);
  for (int stage = 0; stage < p.schedule.stages() && !plans.empty(); ++stage) {
    if (!p.gradient_reduce || plans.AloneNsOf(stage) > p.gradient_reduce->alone_ns) {
      p.gradient_reduce = {std::string(sim::AlgorithmName(plans.of(stage).algorithm)), plans.AloneNsOf(stage), stage};
    }
  }
  p.metrics = ComputeMetrics(p.schedule, p.result, sc.pipeline.microbatch_size, stop);
  // Context parallelism: the schedule's replicas (the metrics' data_parallel) are the D x C
  // pipelines that reduce the gradients; the C of a context group run the same samples.
  p.metrics.throughput_samples_per_s /= sc.pipeline.context_parallel;
  p.metrics.model_tflops_per_device = ModelTflopsPerDevice(sc, p.schedule, p.metrics.step_time_ms);
  // Each pass at its mean over the order's ops: a stash that slows deep ops (sim/stash.h)
  // counted as the engine counted it.
  const std::vector<std::array<double, 4>> stash = sim::MeanStashFactors(p.schedule, costs.rank_stash);
  for (size_t st = 0; st < costs.stages.size(); ++st) {
    schedules::StageCostMetrics& m = p.metrics.stage_costs.emplace_back();
    for (const schedules::StageCostField& f : schedules::kStageCostFields) {
      const int k = sim::StashKindIndex(f.kind);
      const double factor = k >= 0 ? stash[st][static_cast<size_t>(k)] : 1.0;
      // A STEP in place: no copy.
      m.*f.field = static_cast<double>(sim::OpDurationNs(costs.stages[st], f.kind)) * factor * 1e-6;
    }
  }
  return p;
}

schedules::MetricsFile PredictedMetricsFile(const sim::Scenario& scenario, const std::string& costs,
                                            const std::vector<Prediction>& predictions) {
  schedules::MetricsFile file;
  file.scenario = scenario.name;
  file.source = "predicted";
  file.costs = costs;
  for (const Prediction& p : predictions) file.schedules.push_back(p.metrics);
  return file;
}

schedules::Trace PredictedTrace(const sim::Scenario& scenario, const std::string& costs, const Prediction& prediction) {
  schedules::Trace trace =
      schedules::BuildTrace(prediction.schedule, prediction.result, scenario.name, "predicted", prediction.metrics);
  trace.costs = costs;
  return trace;
}

void RefusePredictedOom(const sim::Scenario& sc, const std::vector<Prediction>& predictions) {
  std::string why;
  for (const Prediction& p : predictions) {
    if (!p.metrics.AnyOom()) continue;
    std::string peaks;
    for (const auto& r : p.metrics.ranks_detail) {
      peaks += fmt::format("{}rank {} {}{}", peaks.empty() ? "" : ", ", r.rank, FormatBytes(r.peak_memory_bytes),
                           sc.topology.grouped() ? fmt::format(" of {}", FormatBytes(sim::RankDeviceMemory(sc, r.rank)))
                                                 : "");
    }
    why += fmt::format("{}{} ({})", why.empty() ? "" : "; ", p.schedule.name, peaks);
  }
  if (why.empty()) return;
  const std::string memory = sc.topology.grouped() ? "each rank's device memory (topology.groups' device.memory)"
                                                   : fmt::format("the device memory of {} (topology.device.memory)",
                                                                 FormatBytes(sc.topology.device.memory_bytes));
  throw InputError(fmt::format("{}: predicted to exceed {}: {}; nothing was run (fewer microbatches in flight, "
                               "recompute, more ranks or another schedule would fit)",
                               sc.path, memory, why));
}

std::string MemoryTerms::Dominant() const {
  const std::pair<int64_t, const char*> terms[] = {{activations, "activations dominate"},
                                                   {weights, "weights dominate"},
                                                   {gradients, "gradients dominate"},
                                                   {optimizer, "the optimizer state dominates"},
                                                   {other, "stashes and buffers dominate"}};
  return std::max_element(std::begin(terms), std::end(terms),
                          [](const auto& a, const auto& b) { return a.first < b.first; })
      ->second;
}

MemoryTerms MemoryTermsOf(const Prediction& p, int rank) {
  const schedules::Schedule& s = p.schedule;
  const schedules::RankAnalysis analysis = schedules::Analyze(s)[rank];
  MemoryTerms m;
  // A spilled stage's state starts on the host and visits the device: the rest ("other").
  const std::vector<schedules::TensorKey> away = schedules::StartOnHost(s.ops[rank]);
  const auto on_host = [&](schedules::Tensor tensor, int stage) {
    return std::any_of(away.begin(), away.end(),
                       [&](const schedules::TensorKey& k) { return k.tensor == tensor && k.stage == stage; });
  };
  const bool velocity = sim::KeepsWeightVelocity(s, p.costs);  // PipeMare's, counted with the weights
  for (int chunk = 0; chunk < s.shape.chunks; ++chunk) {
    const int stage = s.shape.StageOf(rank, chunk);
    const sim::StageCost& c = p.costs.stages[stage];
    if (!on_host(schedules::Tensor::kWeights, stage)) {
      m.weights += c.weight_bytes * (analysis.stage_peak_versions[chunk] + (velocity ? 1 : 0));
      m.gradients += c.grad_bytes;
    }
    if (!on_host(schedules::Tensor::kOptimizer, stage) && !p.costs.optimizer_on_host) m.optimizer += c.optimizer_bytes;
  }
  const schedules::HeldPeak held = schedules::PeakHeld(
      s.ops[rank], s.ops[rank].size(), [&](const schedules::Op& op) { return p.costs.stages[op.stage].activation_bytes; });
  m.activations = held.weight;
  m.inflight = held.inflight;
  const int64_t peak = p.result.ranks[rank].peak_memory_bytes;
  m.other = std::max<int64_t>(0, peak - m.weights - m.gradients - m.optimizer - m.activations);
  return m;
}

}  // namespace stagecraft::harness
