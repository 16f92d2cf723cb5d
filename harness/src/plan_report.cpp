// What `stagecraft plan` prints and writes (see plan.h): the ranking, the leaders' bubble and
// memory side by side, the rejections, the JSON of every simulated configuration, and the
// Pareto front of throughput against peak memory as terminal text and as a PNG.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "stagecraft/base/check.h"
#include "stagecraft/base/error.h"
#include "stagecraft/base/format.h"
#include "stagecraft/harness/plan.h"
#include "stagecraft/schedules/json_out.h"
#include "stagecraft/schedules/metrics_json.h"

#include "png_canvas.h"

namespace stagecraft::harness {
namespace {

constexpr const char* kSplitNames[7] = {"compute", "wait", "transfer", "collective", "overhead", "idle",
                                        "offload wait"};

std::string Count(int64_t n) {
  std::string digits = std::to_string(n), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

double Gib(int64_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024 * 1024); }

// TFLOP/s per device to four significant digits (187.5 on a GPU, 0.02013 on a CPU core); "-"
// for a model without a FLOP count (a profile alone).
std::string Tflops(double tflops) { return tflops > 0 ? fmt::format("{:.4g}", tflops) : "-"; }

// How stale the configuration's weights are: the most updates any stage's forward / backward is
// behind synchronous SGD ("0" for a synchronous schedule; "3/0" for PipeMare on 4 ranks).
std::string Staleness(const schedules::ScheduleMetrics& m) {
  int forward = 0, backward = 0;
  for (const schedules::StageDelay& d : m.weight_delays) {
    forward = std::max(forward, d.forward);
    backward = std::max(backward, d.backward);
  }
  return forward == backward ? fmt::format("{}", forward) : fmt::format("{}/{}", forward, backward);
}

std::string TableRow(int rank, const PlanEntry& e, size_t recompute_width) {
  const PlanConfig& c = e.config;
  const std::string dominant = e.memory.Dominant();
  return fmt::format("{:>3}  {:<12} {:>4} {:>4} {:>3}{} {:>3} {:>3} {:>4} {:>5} {:>2}  {:<{}} {:>4} {:<9} {:>13.3f} "
                     "{:>11.2f} {:>8} {:>6.2f}% {:>5} {:>12}  {}\n",
                     rank, c.schedule, c.ranks, c.data_parallel, c.tensor_parallel, c.sequence_parallel ? "s" : " ",
                     c.context_parallel, c.expert_parallel, c.microbatch_size, c.microbatches, c.chunks, RecomputeLabel(c), recompute_width, c.zero, sim::Name(c.partition),
                     e.metrics.step_time_ms, e.metrics.throughput_samples_per_s, Tflops(e.metrics.model_tflops_per_device),
                     100 * e.metrics.bubble_fraction, Staleness(e.metrics), FormatBytes(e.peak_bytes),
                     dominant.substr(0, dominant.find(' ') == std::string::npos ? dominant.size() : dominant.rfind(' ')) +
                         (c.offload_activations > 0 ? ", stashes on the host" : "") +
                         (c.optimizer_on_host ? ", optimizer on the host" : "") +
                         (!c.placement.empty() && c.placement.back() == sim::Axis::kData ? ", a pipeline per group" : ""));
}

// The leaders side by side: each one's step split (mean over ranks, % of its step) and its busiest
// rank's memory by term, one column per leader.
std::string WhyTheLeadersWin(const std::vector<const PlanEntry*>& leaders) {
  std::string out = "why the leaders win: the step split in ms per step (mean over ranks) and the busiest rank's memory, "
                    "side by side\n";
  for (size_t k = 0; k < leaders.size(); ++k) {
    out += fmt::format("  #{} {}\n", k + 1, DescribeConfig(leaders[k]->config));
  }
  const auto row = [&](std::string_view name, const auto& cell) {
    out += fmt::format("  {:<18}", name);
    for (const PlanEntry* e : leaders) out += fmt::format("{:>22}", cell(*e));
    out += "\n";
  };
  out += fmt::format("  {:<18}", "");
  for (size_t k = 0; k < leaders.size(); ++k) out += fmt::format("{:>22}", fmt::format("#{}", k + 1));
  out += "\n";
  row("step ms", [](const PlanEntry& e) { return fmt::format("{:.3f}", e.metrics.step_time_ms); });
  // The wait for reloads only where a leader offloads.
  const bool offloads = std::any_of(leaders.begin(), leaders.end(),
                                    [](const PlanEntry* e) { return e->config.offload_activations > 0; });
  for (int k = 0; k < (offloads ? 7 : 6); ++k) {
    row(kSplitNames[k], [k](const PlanEntry& e) {
      const double step = e.metrics.step_time_ms;
      const double part = e.mean_step_split_ms[k];
      return fmt::format("{:.3f} {:>5.1f}%", part, step > 0 ? 100 * part / step : 0);
    });
  }
  row("memory of rank", [](const PlanEntry& e) { return fmt::format("{}", e.worst_rank); });
  row("weights", [](const PlanEntry& e) { return FormatBytes(e.memory.weights); });
  row("gradients", [](const PlanEntry& e) { return FormatBytes(e.memory.gradients); });
  row("optimizer state", [](const PlanEntry& e) { return FormatBytes(e.memory.optimizer); });
  row("activations", [](const PlanEntry& e) {
    return fmt::format("{} ({})", FormatBytes(e.memory.activations), e.memory.inflight);
  });
  row("other", [](const PlanEntry& e) { return FormatBytes(e.memory.other); });
  row("peak", [](const PlanEntry& e) { return FormatBytes(e.peak_bytes); });
  return out;
}

std::string Rejections(const PlanResult& r) {
  std::string layouts, configs;
  for (int k = 0; k < kPlanRejectKinds; ++k) {
    const auto why = Name(static_cast<PlanReject>(k));
    if (r.layouts_rejected[k] > 0) {
      layouts += fmt::format(", {} {}", r.layouts_rejected[k],
                             static_cast<PlanReject>(k) == PlanReject::kShape ? "deeper than the model" : why);
    }
    if (r.rejected[k] > 0) {
      configs += fmt::format("{}{} {}", configs.empty() ? "" : ", ", Count(r.rejected[k]), why);
      if (static_cast<PlanReject>(k) == PlanReject::kMemory) {
        configs += fmt::format(" ({} by the floors, {} simulated)", Count(r.rejected[k] - r.memory_rejected_simulated),
                               Count(r.memory_rejected_simulated));
      }
    }
  }
  int kept = r.layouts;
  for (const int n : r.layouts_rejected) kept -= n;
  return fmt::format("layouts P x D x T x C = {}{}: {}{}; {} of them make {} configurations\n"
                     "rejected: {}\n",
                     r.gpus,
                     std::any_of(r.context_parallel.begin(), r.context_parallel.end(), [](int c) { return c > 1; })
                         ? fmt::format(" (C: {})", fmt::join(r.context_parallel, ", "))
                         : "",
                     r.layouts, layouts, kept, Count(r.enumerated), configs.empty() ? "none" : configs);
}

}  // namespace

std::string DescribePlan(const PlanResult& r, int top) {
  std::string out = fmt::format("plan {}: {} devices, global batch {}, at most {} per device; costs: {}\n", r.scenario,
                                r.gpus, r.global_batch, FormatBytes(r.memory_limit_bytes), r.cost_source);
  out += Rejections(r);
  out += fmt::format("simulated: {} in {:.1f} s on {} thread{}\n", Count(r.simulated), r.seconds, r.threads,
                     r.threads == 1 ? "" : "s");
  for (const std::string& note : r.notes) out += "note: " + note + "\n";
  out += fmt::format("top {} by throughput:\n", top);
  // One row per distinct run: schedules that make the same run on a layout (the same step to the
  // nanosecond and the same peak, as 1F1B and ZB-H1 on one pipeline rank) share a row.
  std::vector<const PlanEntry*> rows;
  std::vector<std::vector<std::string>> same;
  for (const PlanEntry& e : r.entries) {
    if (!e.fits) break;
    bool merged = false;
    for (size_t k = 0; k < rows.size() && !merged; ++k) {
      PlanConfig a = rows[k]->config, b = e.config;
      a.schedule = b.schedule;
      if (a == b && rows[k]->metrics.makespan_ns == e.metrics.makespan_ns && rows[k]->peak_bytes == e.peak_bytes &&
          Staleness(rows[k]->metrics) == Staleness(e.metrics)) {
        same[k].push_back(e.config.schedule);
        merged = true;
      }
    }
    if (merged) continue;
    if (static_cast<int>(rows.size()) == top) break;
    rows.push_back(&e);
    same.emplace_back();
  }
  // The recompute column as wide as its longest label (16 but for a selective set of many modules).
  size_t width = 16;
  for (const PlanEntry* e : rows) width = std::max(width, RecomputeLabel(e->config).size());
  out += fmt::format("{:>3}  {:<12} {:>4} {:>4} {:>4} {:>3} {:>3} {:>4} {:>5} {:>2}  {:<{}} {:>4} {:<9} {:>13} {:>11} {:>8} {:>7} "
                     "{:>5} {:>12}  {}\n",
                     "#", "schedule", "P", "D", "T", "C", "E", "b", "m", "v", "recompute", width, "zero", "partition", "step ms",
                     "samples/s", "TFLOP/s", "bubble", "stale", "peak memory", "largest term");
  for (size_t k = 0; k < rows.size(); ++k) {
    std::string row = TableRow(static_cast<int>(k) + 1, *rows[k], width);
    if (!same[k].empty()) {
      row.pop_back();
      row += fmt::format("  (the same run: {})\n", fmt::join(same[k], ", "));
    }
    out += row;
  }
  // Asynchronous schedules never flush, and pay for it in staleness: say so where one is listed.
  if (std::any_of(rows.begin(), rows.end(), [](const PlanEntry* e) { return Staleness(e->metrics) != "0"; })) {
    out += "stale: updates the most stale stage's weights are behind synchronous SGD, forward/backward when they "
           "differ (asynchronous schedules: no flush, but more steps may be needed to reach a loss)\n";
  }
  std::vector<const PlanEntry*> leaders(rows.begin(), rows.begin() + std::min<size_t>(3, rows.size()));
  out += WhyTheLeadersWin(leaders);
  out += fmt::format("Pareto front, throughput against peak memory ({} of {} fitting configurations):\n", r.pareto.size(),
                     std::count_if(r.entries.begin(), r.entries.end(), [](const PlanEntry& e) { return e.fits; }));
  for (const int i : r.pareto) {
    const PlanEntry& e = r.entries[i];
    out += fmt::format("  {:>12} {:>11.2f} samples/s  {}\n", FormatBytes(e.peak_bytes),
                       e.metrics.throughput_samples_per_s, DescribeConfig(e.config));
  }
  out += ParetoAscii(r);
  return out;
}

std::string PlanJson(const PlanResult& r) {
  schedules::JsonOut j;
  j.StartObject();
  j.Key("scenario").String(r.scenario).Key("source").String("predicted").Key("costs").String(r.cost_source);
  j.Key("gpus").Int(r.gpus).Key("global_batch").Int(r.global_batch).Key("memory_limit_bytes").Int(r.memory_limit_bytes);
  j.Key("context_parallel").StartArray();  // the C tried
  for (const int c : r.context_parallel) j.Int(c);
  j.EndArray();
  j.Key("layouts").Int(r.layouts).Key("enumerated").Int(r.enumerated).Key("simulated").Int(r.simulated);
  j.Key("space_ops").Number(r.space_ops).Key("max_microbatches").Int(r.max_microbatches);
  j.Key("seconds").Number(r.seconds).Key("threads").Int(r.threads);
  const auto reasons = [&](const auto& counts) {
    j.StartObject();
    for (int k = 0; k < kPlanRejectKinds; ++k) j.Key(Name(static_cast<PlanReject>(k))).Int(counts[k]);
    j.EndObject();
  };
  j.Key("layouts_rejected");
  reasons(r.layouts_rejected);
  j.Key("rejected");
  reasons(r.rejected);
  j.Key("notes").Strings(r.notes);
  j.Key("configurations").StartArray();
  for (size_t i = 0; i < r.entries.size(); ++i) {
    const PlanEntry& e = r.entries[i];
    const PlanConfig& c = e.config;
    j.StartObject();
    j.Key("rank").Int(static_cast<int64_t>(i) + 1).Key("fits").Bool(e.fits);
    j.Key("pareto").Bool(std::find(r.pareto.begin(), r.pareto.end(), static_cast<int>(i)) != r.pareto.end());
    j.Key("layout").StartObject();
    j.Key("schedule").String(c.schedule).Key("ranks").Int(c.ranks).Key("data_parallel").Int(c.data_parallel);
    j.Key("tensor_parallel").Int(c.tensor_parallel).Key("sequence_parallel").Bool(c.sequence_parallel);
    // Always, as ConfigOverrides: a layout read back as overrides replaces the scenario's C and E.
    j.Key("context_parallel").Int(c.context_parallel).Key("expert_parallel").Int(c.expert_parallel);
    if (!c.placement.empty()) {
      j.Key("placement").StartArray();
      for (const sim::Axis axis : c.placement) j.String(sim::Name(axis));
      j.EndArray();
    }
    j.Key("chunks").Int(c.chunks).Key("microbatches").Int(c.microbatches).Key("microbatch_size").Int(c.microbatch_size);
    j.Key("recompute").String(sim::Name(c.recompute));
    if (c.recompute == sim::Recompute::kSelective) {
      j.Key("recompute_modules").StartArray();
      for (const auto& [module, name] : sim::kRecomputeModuleNames) {
        if (c.recompute_modules.Has(module)) j.String(name);
      }
      j.EndArray();
    }
    j.Key("zero").Int(c.zero).Key("partition").String(sim::Name(c.partition));
    if (c.offload_activations > 0) j.Key("offload_activations").Number(c.offload_activations);
    if (c.optimizer_on_host) j.Key("optimizer_on_host").Bool(true);
    j.EndObject();
    j.Key("tflops_per_gpu").Number(e.metrics.model_tflops_per_device).Key("bound_step_time_ms").Number(e.bound_ms);
    j.Key("peak_memory_bytes").Int(e.peak_bytes).Key("peak_memory_rank").Int(e.worst_rank);
    j.Key("memory_terms").StartObject();
    j.Key("weights").Int(e.memory.weights).Key("gradients").Int(e.memory.gradients);
    j.Key("optimizer").Int(e.memory.optimizer).Key("activations").Int(e.memory.activations);
    j.Key("inflight").Int(e.memory.inflight).Key("other").Int(e.memory.other);
    j.Key("largest").String(e.memory.Dominant());
    j.EndObject();
    j.Key("metrics").Raw(schedules::ScheduleMetricsToJson(e.metrics));
    j.EndObject();
  }
  j.EndArray();
  j.EndObject();
  return j.Take() + "\n";
}

namespace {

// Where the points of the plot go: peak memory (GiB) across, throughput (samples/s) up.
struct Frame {
  double x0 = 0, x1 = 1, y0 = 0, y1 = 1;
};

Frame FrameOf(const PlanResult& r) {
  Frame f{1e300, -1e300, 1e300, -1e300};
  for (const PlanEntry& e : r.entries) {
    if (!e.fits) continue;
    f.x0 = std::min(f.x0, Gib(e.peak_bytes));
    f.x1 = std::max(f.x1, Gib(e.peak_bytes));
    f.y0 = std::min(f.y0, e.metrics.throughput_samples_per_s);
    f.y1 = std::max(f.y1, e.metrics.throughput_samples_per_s);
  }
  if (f.x0 > f.x1) return Frame{};
  const double dx = std::max(f.x1 - f.x0, 1e-9 + 0.05 * f.x1), dy = std::max(f.y1 - f.y0, 1e-9 + 0.05 * f.y1);
  return {std::max(0.0, f.x0 - 0.04 * dx), f.x1 + 0.04 * dx, std::max(0.0, f.y0 - 0.04 * dy), f.y1 + 0.04 * dy};
}


}  // namespace

std::string ParetoAscii(const PlanResult& r, int width, int height) {
  const Frame f = FrameOf(r);
  std::vector<std::string> grid(height, std::string(width, ' '));
  const auto put = [&](const PlanEntry& e, char mark) {
    char& cell = grid[height - 1 - Cell(e.metrics.throughput_samples_per_s, f.y0, f.y1, height)]
                     [Cell(Gib(e.peak_bytes), f.x0, f.x1, width)];
    if (mark == '@' || cell == ' ' || (mark == '*' && cell == '.')) cell = mark;
  };
  for (const PlanEntry& e : r.entries) {
    if (e.fits) put(e, '.');
  }
  for (const int i : r.pareto) put(r.entries[i], '*');
  if (r.best() != nullptr) put(*r.best(), '@');
  std::string out = fmt::format("  samples/s  (@ best, * Pareto front, . other fitting configurations)\n");
  for (int row = 0; row < height; ++row) {
    const double y = f.y1 - (f.y1 - f.y0) * row / (height - 1);
    out += fmt::format("{:>11} |{}\n", row == 0 || row == height - 1 || row == height / 2 ? fmt::format("{:.4g}", y) : "",
                       grid[row]);
  }
  out += fmt::format("{:>11} +{}\n", "", std::string(width, '-'));
  const std::string left = fmt::format("{:.3g} GiB", f.x0), right = fmt::format("{:.3g} GiB", f.x1);
  out += fmt::format("{:>11}  {}{}{}\n", "", left, std::string(std::max<int>(1, width - left.size() - right.size()), ' '),
                     right);
  out += fmt::format("{:>11}  {:^{}}\n", "", "peak memory per device", width);
  return out;
}

std::string ParetoPng(const PlanResult& r, int width, int height) {
  SC_CHECK(width >= 200 && height >= 150, "a plot large enough for its axes");
  const Frame f = FrameOf(r);
  Canvas canvas(width, height);
  const int left = 90, right = width - 20, top = 40, bottom = height - 60;
  const auto px = [&](double gib) { return left + Cell(gib, f.x0, f.x1, right - left); };
  const auto py = [&](double rate) { return bottom - Cell(rate, f.y0, f.y1, bottom - top); };
  canvas.Line(left, top, left, bottom, 0x000000);
  canvas.Line(left, bottom, right, bottom, 0x000000);
  for (int k = 0; k <= 4; ++k) {  // ticks with their values
    const double gib = f.x0 + (f.x1 - f.x0) * k / 4, rate = f.y0 + (f.y1 - f.y0) * k / 4;
    canvas.Line(px(gib), bottom, px(gib), bottom + 6, 0x000000);
    canvas.Text(px(gib) - 12, bottom + 12, fmt::format("{:.3g}", gib), 2, 0x000000);
    canvas.Line(left - 6, py(rate), left, py(rate), 0x000000);
    canvas.Text(8, py(rate) - 5, fmt::format("{:.4g}", rate), 2, 0x000000);
  }
  canvas.Text(left, height - 22, "PEAK MEMORY PER DEVICE (GIB)", 2, 0x000000);
  canvas.Text(8, 10, "THROUGHPUT (SAMPLES/S) - PARETO FRONT RED, BEST BLUE", 2, 0x000000);
  for (const PlanEntry& e : r.entries) {
    if (!e.fits) continue;
    const int x = px(Gib(e.peak_bytes)), y = py(e.metrics.throughput_samples_per_s);
    canvas.Fill(x - 2, y - 2, x + 2, y + 2, 0x9a9a9a);
  }
  for (size_t k = 0; k < r.pareto.size(); ++k) {
    const PlanEntry& e = r.entries[r.pareto[k]];
    const int x = px(Gib(e.peak_bytes)), y = py(e.metrics.throughput_samples_per_s);
    if (k > 0) {
      const PlanEntry& p = r.entries[r.pareto[k - 1]];
      canvas.Line(px(Gib(p.peak_bytes)), py(p.metrics.throughput_samples_per_s), x, y, 0xd62728);
    }
    canvas.Fill(x - 4, y - 4, x + 4, y + 4, 0xd62728);
  }
  if (const PlanEntry* best = r.best()) {
    const int x = px(Gib(best->peak_bytes)), y = py(best->metrics.throughput_samples_per_s);
    canvas.Fill(x - 6, y - 6, x + 6, y + 6, 0x1f3bd6);
  }
  return canvas.Png();
}

}  // namespace stagecraft::harness
