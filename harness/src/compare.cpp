// CompareRuns (compare.h): per schedule in both files, the text block and the JSON object of its
// errors (step time, throughput, bubble, each rank's busy time, memory and bubble parts, each
// stage's passes), a partial run's finished steps, and the summary table.
#include "stagecraft/harness/compare.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "compare_files.h"
#include "stagecraft/base/error.h"
#include "stagecraft/base/input_file.h"
#include "stagecraft/base/printable.h"
#include "stagecraft/base/stats.h"
#include "stagecraft/harness/replay.h"
#include "stagecraft/harness/trace_path.h"
#include "stagecraft/schedules/budget.h"
#include "stagecraft/schedules/json_out.h"
#include "stagecraft/schedules/metrics.h"
#include "stagecraft/schedules/metrics_json.h"
#include "stagecraft/schedules/trace.h"

namespace stagecraft::harness {

namespace {

using schedules::ErrorSplit;  // a step-time and bubble error in two parts (trace_path)
using schedules::JsonOut;
using schedules::ScheduleMetrics;
using SplitOf = std::function<std::optional<ErrorSplit>(const ScheduleMetrics& predicted,
                                                         const ScheduleMetrics& measured)>;

// "+10.0%", "-5.0 pp", "0.0%" (no sign on zero, so never "-0.0"), "n/a".
std::string ErrorText(std::optional<double> error, std::string_view unit) {
  if (!error) return "n/a";
  if (std::round(*error * 10) == 0) return fmt::format("0.0{}", unit);
  return fmt::format("{:+.1f}{}", *error, unit);
}

// "key":{"predicted":..,"measured":..,<error_key>:.. or null}
void ErrorJson(JsonOut& out, std::string_view key, double predicted, double measured, std::optional<double> error,
               const char* error_key) {
  out.Key(key).StartObject().Key("predicted").Number(predicted).Key("measured").Number(measured).Key(error_key);
  error ? out.Number(*error) : out.Null();
  out.EndObject();
}

constexpr std::string_view kRowFormat = "  {:<24} {:>12} {:>12} {:>9}\n";

std::string Row(std::string_view metric, double predicted, double measured, int decimals, std::string_view error) {
  return fmt::format(kRowFormat, metric, fmt::format("{:.{}f}", predicted, decimals),
                     fmt::format("{:.{}f}", measured, decimals), error);
}

// The throughputs' error; none when either run took no time (its throughput is not defined).
std::optional<double> ThroughputError(const ScheduleMetrics& p, const ScheduleMetrics& m) {
  if (!(p.step_time_ms > 0) || !(m.step_time_ms > 0)) return std::nullopt;
  return RelativeErrorPct(p.throughput_samples_per_s, m.throughput_samples_per_s);
}

std::string Shape(const ScheduleMetrics& s) {
  const std::string replicas = s.data_parallel > 1 ? fmt::format(" x {} replicas", s.data_parallel) : "";
  return fmt::format("{} ranks{}, {} microbatches x {} samples, {} step(s)", s.ranks, replicas, s.microbatches,
                     s.microbatch_size, s.steps);
}

// How much the measured step time moved from step to step: over the steps after the first
// (which also warms the caches), median, min, max and (max - min) / median. Needs 3 steps.
struct StepSpread {
  int first_step = 1, last_step = 1;
  double median_ms = 0, min_ms = 0, max_ms = 0, spread_pct = 0;
};

std::optional<StepSpread> StepSpreadOf(const ScheduleMetrics& m) {
  if (!m.executor || m.executor->step_ms.size() < 3) return std::nullopt;
  const SeriesSpread series = SpreadOf(std::vector<double>(m.executor->step_ms.begin() + 1, m.executor->step_ms.end()));
  StepSpread s;
  s.last_step = static_cast<int>(m.executor->step_ms.size()) - 1;
  s.median_ms = series.median;
  s.min_ms = series.min;
  s.max_ms = series.max;
  s.spread_pct = series.spread_pct;
  return s;
}

// The per-rank rows and their JSON array: busy time and peak memory as relative errors, the
// rest of the makespan by cause (bubble_split.h) as differences in ms (a part can be 0). The
// collective part is there when either run had replicas (a one-replica report is as before).
void CompareRanks(const ScheduleMetrics& p, const ScheduleMetrics& m, std::string* text, JsonOut& json) {
  using schedules::RankMetrics;
  using Part = std::pair<const char*, double RankMetrics::*>;
  std::vector<Part> parts = {{"wait", &RankMetrics::wait_ms}, {"transfer", &RankMetrics::transfer_ms}};
  if (p.data_parallel > 1 || m.data_parallel > 1) parts.emplace_back("collective", &RankMetrics::collective_ms);
  const auto copies = [](const ScheduleMetrics& x) {
    return std::any_of(x.ranks_detail.begin(), x.ranks_detail.end(),
                       [](const RankMetrics& r) { return r.peak_host_memory_bytes >= 0; });
  };
  if (copies(p) || copies(m)) parts.emplace_back("offload_wait", &RankMetrics::offload_wait_ms);
  parts.insert(parts.end(), {{"overhead", &RankMetrics::overhead_ms}, {"idle", &RankMetrics::idle_ms}});
  json.StartArray();
  for (size_t r = 0; r < p.ranks_detail.size(); ++r) {
    const double p_busy = p.ranks_detail[r].busy_ms, m_busy = m.ranks_detail[r].busy_ms;
    const auto busy = RelativeErrorPct(p_busy, m_busy);
    *text += Row(fmt::format("rank {} busy (ms)", r), p_busy, m_busy, 3, ErrorText(busy, "%"));
    const double p_mem = static_cast<double>(p.ranks_detail[r].peak_memory_bytes);
    const double m_mem = static_cast<double>(m.ranks_detail[r].peak_memory_bytes);
    const auto mem = RelativeErrorPct(p_mem, m_mem);
    *text += Row(fmt::format("rank {} peak mem (MiB)", r), p_mem / (1 << 20), m_mem / (1 << 20), 3,
                 ErrorText(mem, "%"));
    json.StartObject().Key("rank").Int(static_cast<int64_t>(r));
    ErrorJson(json, "busy_ms", p_busy, m_busy, busy, "error_pct");
    ErrorJson(json, "peak_memory_bytes", p_mem, m_mem, mem, "error_pct");
    for (const auto& [name, field] : parts) {
      const double pv = p.ranks_detail[r].*field, mv = m.ranks_detail[r].*field;
      *text += Row(fmt::format("rank {} {} (ms)", r, name), pv, mv, 3, ErrorText(pv - mv, " ms"));
      ErrorJson(json, fmt::format("{}_ms", name), pv, mv, pv - mv, "error_ms");
    }
    json.EndObject();
  }
  json.EndArray();
}

// One microbatch's passes per stage, when both files have them (a predicted file always does,
// a measured one from this version on): a line per stage with each pass the run ran, predicted
// / measured and the error, and the pass most off over all stages. JSON: "stages", per stage
// each such pass's {predicted, measured, error_pct}.
void CompareStages(const ScheduleMetrics& p, const ScheduleMetrics& m, std::string* text, JsonOut& json) {
  *text += "  one microbatch's pass per stage, predicted / measured ms (error):\n";
  json.Key("stages").StartArray();
  std::string worst;
  double worst_abs = -1;
  for (size_t st = 0; st < p.stage_costs.size(); ++st) {
    std::string line = fmt::format("    stage {}:", st);
    json.StartObject().Key("stage").Int(static_cast<int64_t>(st));
    for (const schedules::StageCostField& f : schedules::kStageCostFields) {
      const double pv = p.stage_costs[st].*f.field, mv = m.stage_costs[st].*f.field;
      if (mv <= 0) continue;  // a pass this run did not run
      const auto error = RelativeErrorPct(pv, mv);
      const std::string_view pass = schedules::KindName(f.kind);
      line += fmt::format(" {} {:.3f} / {:.3f} ({})", pass, pv, mv, ErrorText(error, "%"));
      ErrorJson(json, f.key, pv, mv, error, "error_pct");
      if (error && std::abs(*error) > worst_abs) {
        worst_abs = std::abs(*error);
        worst = fmt::format("{} of stage {} ({})", pass, st, ErrorText(error, "%"));
      }
    }
    json.EndObject();
    *text += line + "\n";
  }
  json.EndArray();
  if (!worst.empty()) *text += fmt::format("  the pass most off: {}\n", worst);
}

// The text block and the JSON object of one schedule found in both files.
void CompareOne(const ScheduleMetrics& p, const ScheduleMetrics& m, const std::optional<ErrorSplit>& split,
                std::string* text, std::string* json) {
  const auto step = RelativeErrorPct(p.step_time_ms, m.step_time_ms);
  const auto throughput = ThroughputError(p, m);
  const double bubble_pp = ErrorPp(p.bubble_fraction, m.bubble_fraction);
  const std::optional<StepSpread> spread = StepSpreadOf(m);
  *text += fmt::format("{}: {}\n", p.schedule, Shape(p));
  if (Shape(p) != Shape(m)) *text += fmt::format("  note: measured with {}\n", Shape(m));
  *text += fmt::format(kRowFormat, "metric", "predicted", "measured", "error");
  *text += Row("step time (ms)", p.step_time_ms, m.step_time_ms, 3, ErrorText(step, "%"));
  if (spread) {
    *text += fmt::format("  measured steps {}..{}: median {:.3f} ms, {:.3f} to {:.3f} ms (spread {:.1f}%)\n",
                         spread->first_step, spread->last_step, spread->median_ms, spread->min_ms, spread->max_ms,
                         spread->spread_pct);
  }
  *text += fmt::format(kRowFormat, "throughput (samples/s)", schedules::ThroughputText(p),
                       schedules::ThroughputText(m), ErrorText(throughput, "%"));
  *text += Row("bubble (%)", 100 * p.bubble_fraction, 100 * m.bubble_fraction, 2, ErrorText(bubble_pp, " pp"));
  if (split) {
    *text += fmt::format("  step-time error {} = cost drift {} (the run's own op and transfer times against the "
                         "prediction's) + model error {} (their replay, {:.3f} ms, against the run)\n",
                         ErrorText(step, "%"), ErrorText(split->cost_drift_pct, "%"),
                         ErrorText(split->model_error_pct, "%"), split->replay_step_ms);
    *text += fmt::format("  bubble error {} = cost drift {} + model error {} (the replay's bubble {:.2f}%)\n",
                         ErrorText(bubble_pp, " pp"), ErrorText(split->cost_drift_pp, " pp"),
                         ErrorText(split->model_error_pp, " pp"), 100 * split->replay_bubble);
  }
  JsonOut out;
  out.StartObject().Key("schedule").String(p.schedule).Key("ranks").Int(p.ranks);
  out.Key("microbatches").Int(p.microbatches).Key("microbatch_size").Int(p.microbatch_size).Key("steps").Int(p.steps);
  if (p.data_parallel > 1) out.Key("data_parallel").Int(p.data_parallel);  // as the metrics files have it
  ErrorJson(out, "step_time_ms", p.step_time_ms, m.step_time_ms, step, "error_pct");
  ErrorJson(out, "throughput_samples_per_s", p.throughput_samples_per_s, m.throughput_samples_per_s, throughput,
            "error_pct");
  ErrorJson(out, "bubble_fraction", p.bubble_fraction, m.bubble_fraction, bubble_pp, "error_pp");
  if (split) {
    out.Key("cost_drift_pct").Number(split->cost_drift_pct).Key("model_error_pct").Number(split->model_error_pct);
    out.Key("replay_step_time_ms").Number(split->replay_step_ms);
    out.Key("replay_bubble_fraction").Number(split->replay_bubble);
    out.Key("model_bubble_error_pp").Number(split->model_error_pp);
  }
  out.Key("per_rank");
  CompareRanks(p, m, text, out);
  if (!p.stage_costs.empty() && p.stage_costs.size() == m.stage_costs.size()) CompareStages(p, m, text, out);
  if (spread) {
    out.Key("measured_step_spread").StartObject().Key("first_step").Int(spread->first_step).Key("last_step");
    out.Int(spread->last_step).Key("median_ms").Number(spread->median_ms).Key("min_ms").Number(spread->min_ms);
    out.Key("max_ms").Number(spread->max_ms).Key("spread_pct").Number(spread->spread_pct).EndObject();
  }
  if (m.executor && !m.executor->losses.empty()) {
    const std::vector<double>& losses = m.executor->losses;
    *text += fmt::format("  loss (measured): first {:.6g}, last {:.6g} over {} step(s)\n", losses.front(),
                         losses.back(), losses.size());
    out.Key("losses").StartObject().Key("first").Number(losses.front()).Key("last").Number(losses.back()).EndObject();
  }
  // training.target_loss: what a user pays for, beside what the schedule's throughput is.
  if (const auto& e = m.executor; e && e->target_loss) {
    const bool reached = e->target_reached_step >= 0;
    *text += fmt::format("  time to loss {:.6g}: {} ({:.1f} samples/s)\n", *e->target_loss, schedules::TargetText(*e),
                         m.throughput_samples_per_s);
    out.Key("time_to_target").StartObject().Key("target_loss").Number(*e->target_loss).Key("samples_per_s");
    out.Number(m.throughput_samples_per_s).Key("target_reached_step");
    (reached ? out.Int(e->target_reached_step) : out.Null()).Key("time_to_target_ms");
    (reached ? out.Number(e->time_to_target_ms) : out.Null()).EndObject();
  }
  *json = out.EndObject().Take();
}

// The names of `a`'s schedules that `b` lacks, in `a`'s order.
std::vector<std::string> OnlyIn(const RunFile& a, const RunFile& b) {
  std::vector<std::string> names;
  for (const ScheduleMetrics& s : a.schedules) {
    if (b.Find(s.schedule) == nullptr) names.push_back(s.schedule);
  }
  return names;
}

std::string FileLine(const char* label, const RunFile& f) {
  return fmt::format("{:<10} {}{}\n", label, f.path,
                     f.scenario.empty() ? "" : fmt::format(" (scenario {})", f.scenario));
}

struct Report {
  std::string text;
  std::vector<std::string> schedules_json;  // one object per schedule compared
  std::string partial_json;                 // the partial run's object, when the run is one
  std::string worst;  // the schedule with the largest |step-time error|
  double worst_error_pct = 0;
  std::vector<std::string> exceeded;       // schedules whose |step-time error| is over max_error_pct
  std::vector<std::string> exceeded_text;  // the same with their errors: "1f1b (+10.0%)"
  std::string summary;                     // one row per schedule, printed after the blocks
};

constexpr std::string_view kSummaryFormat = "{:<12} {:>12} {:>12} {:>8} {:>8}   {:>11} {:>9} {:>8}\n";

// Holds `error` of `name` against max_error_pct (negative: none); an error that cannot be
// computed (a measured time of 0) is beyond any limit.
void HoldToLimit(const std::string& name, std::optional<double> error, double max_error_pct, Report* report) {
  if (max_error_pct < 0 || (error && std::abs(*error) <= max_error_pct)) return;
  report->exceeded.push_back(name);
  report->exceeded_text.push_back(fmt::format("{} ({})", name, ErrorText(error, "%")));
}

// One block per schedule found in both files, in the predicted file's order.
void CompareCommon(const RunFile& predicted, const RunFile& measured, double max_error_pct, const SplitOf& split_of,
                   Report* report) {
  for (const ScheduleMetrics& p : predicted.schedules) {
    const ScheduleMetrics* m = measured.Find(p.schedule);
    if (m == nullptr) continue;
    if (p.ranks_detail.size() != m->ranks_detail.size()) {
      throw InputError(fmt::format("{}: schedule {} has {} ranks in per_rank but {} in {}", measured.path, p.schedule,
                                   m->ranks_detail.size(), p.ranks_detail.size(), predicted.path));
    }
    std::string entry;
    report->text += "\n";
    CompareOne(p, *m, split_of ? split_of(p, *m) : std::nullopt, &report->text, &entry);
    report->schedules_json.push_back(std::move(entry));
    const double error = *RelativeErrorPct(p.step_time_ms, m->step_time_ms);  // measured step time is > 0
    const std::optional<StepSpread> spread = StepSpreadOf(*m);
    report->summary += fmt::format(kSummaryFormat, p.schedule, fmt::format("{:.3f}", p.step_time_ms),
                                   fmt::format("{:.3f}", m->step_time_ms), ErrorText(error, "%"),
                                   spread ? fmt::format("{:.1f}%", spread->spread_pct) : "-",
                                   fmt::format("{:.2f}%", 100 * p.bubble_fraction),
                                   fmt::format("{:.2f}%", 100 * m->bubble_fraction),
                                   ErrorText(ErrorPp(p.bubble_fraction, m->bubble_fraction), " pp"));
    if (report->worst.empty() || std::abs(error) > std::abs(report->worst_error_pct)) {
      report->worst = p.schedule;
      report->worst_error_pct = error;
    }
    HoldToLimit(p.schedule, error, max_error_pct, report);
  }
}

// A partial run (execute's OUT.partial, metrics.h PartialRun): one warning line to `warn`, and
// the running schedule's finished steps as a block of their own (its complete schedules are
// compared as usual); its step-time error is held to max_error_pct like theirs. Returns whether
// predicted holds the running schedule with a step done.
bool ComparePartial(const RunFile& predicted, const RunFile& measured, double max_error_pct,
                    const std::function<void(const std::string&)>& warn, Report* report) {
  const schedules::PartialRun& run = *measured.partial;
  const size_t done = run.step_ms.size();
  if (warn) {
    warn(fmt::format("warning: {} is a partial run, not a complete one: {} of {} schedule(s) finished{}; only what "
                     "finished is compared", measured.path, run.schedules_done, run.schedules_total,
                     run.schedule.empty() ? ""
                                          : fmt::format(", then {} stopped after {} of {} step(s)", run.schedule, done,
                                                        run.steps)));
  }
  JsonOut json;
  json.StartObject().Key("schedules_done").Int(run.schedules_done).Key("schedules_total").Int(run.schedules_total);
  json.Key("schedule").String(run.schedule).Key("steps_done").Int(static_cast<int64_t>(done));
  json.Key("steps").Int(run.steps);
  const ScheduleMetrics* p = run.schedule.empty() ? nullptr : predicted.Find(run.schedule);
  if (p == nullptr || done == 0) {
    report->partial_json = json.EndObject().Take();
    return false;
  }
  // The finished steps after the first (which also warms the caches), when there are such.
  const double median = Median(std::vector<double>(run.step_ms.begin() + (done > 1 ? 1 : 0), run.step_ms.end()));
  const std::optional<double> error = RelativeErrorPct(p->step_time_ms, median);
  report->text += fmt::format("\n{} (partial run: {} of {} steps finished): {}\n", run.schedule, done, run.steps,
                              Shape(*p));
  report->text += fmt::format(kRowFormat, "metric", "predicted", "measured", "error");
  report->text += Row(fmt::format("step time (ms, median of steps {}..{})", done > 1 ? 1 : 0, done - 1),
                      p->step_time_ms, median, 3, ErrorText(error, "%"));
  report->text += fmt::format("  loss (measured): first {:.6g}, last {:.6g} over {} step(s)\n", run.losses.front(),
                              run.losses.back(), done);
  ErrorJson(json, "step_time_ms", p->step_time_ms, median, error, "error_pct");
  report->partial_json = json.EndObject().Take();
  if (error) {
    report->worst = run.schedule + " (partial)";
    report->worst_error_pct = *error;
  }
  HoldToLimit(run.schedule + " (partial)", error, max_error_pct, report);
  report->summary += fmt::format(kSummaryFormat, run.schedule + "*", fmt::format("{:.3f}", p->step_time_ms),
                                 fmt::format("{:.3f}", median), ErrorText(error, "%"), "-", "-", "-", "-");
  return true;
}

// Adds the partial run's block after the complete schedules: its text and summary row, its
// error as the worst when larger, and its place among the errors over max_error_pct.
void AddPartial(Report partial, Report* r) {
  r->text += partial.text;
  r->summary += partial.summary;
  r->partial_json = std::move(partial.partial_json);
  const bool worse = r->worst.empty() || std::abs(partial.worst_error_pct) > std::abs(r->worst_error_pct);
  if (!partial.worst.empty() && worse) {
    r->worst = partial.worst;
    r->worst_error_pct = partial.worst_error_pct;
  }
  r->exceeded.insert(r->exceeded.end(), partial.exceeded.begin(), partial.exceeded.end());
  r->exceeded_text.insert(r->exceeded_text.end(), partial.exceeded_text.begin(), partial.exceeded_text.end());
}

// Refuses one file given as both sides, and a measured run given first with a prediction second
// (the files swapped: every error would be inverted). Two predictions, or two runs, compare one
// against the other.
void CheckPair(const RunFile& predicted, const RunFile& measured) {
  std::error_code ec;
  if (predicted.path == measured.path || std::filesystem::equivalent(predicted.path, measured.path, ec)) {
    throw InputError(fmt::format("{}: given as both the predicted and the measured file; compare a prediction "
                                 "(simulate --json) with a run (execute --json)",
                                 measured.path));
  }
  if (predicted.source == "measured" && measured.source == "predicted") {
    throw InputError(fmt::format("{}: source is 'measured' and {}'s is 'predicted': the files are swapped; give the "
                                 "prediction first (compare PREDICTED MEASURED)",
                                 predicted.path, measured.path));
  }
}

}  // namespace

Comparison CompareRuns(const RunFile& predicted, const RunFile& measured, const CompareOptions& options) {
  if (predicted.partial) {
    throw InputError(fmt::format("{}: is a partial measured run, not a prediction; give it as the second file",
                                 predicted.path));
  }
  CheckPair(predicted, measured);
  CheckStepTimes(measured);
  const std::vector<std::string> only_predicted = OnlyIn(predicted, measured);
  const std::vector<std::string> only_measured = OnlyIn(measured, predicted);
  Report partial;
  const bool partial_compared =
      measured.partial && ComparePartial(predicted, measured, options.max_error_pct, options.warn, &partial);
  if (only_predicted.size() == predicted.schedules.size() && !partial_compared) {
    throw InputError(fmt::format("no schedule in common: {} has [{}], {} has [{}]", predicted.path,
                                 fmt::join(only_predicted, ", "), measured.path, fmt::join(only_measured, ", ")));
  }
  Report r;
  r.text = FileLine("predicted:", predicted) + FileLine("measured:", measured);
  // Each schedule's measured trace, replayed to split its error; one without a trace is not split.
  SplitOf split_of;
  if (!options.trace_path.empty()) {
    split_of = [&, traces = detail::MeasuredTraces(options.trace_path, predicted, measured)](
                   const ScheduleMetrics& p, const ScheduleMetrics& m) -> std::optional<ErrorSplit> {
      const auto trace = std::find_if(traces.begin(), traces.end(),
                                      [&](const detail::TraceFile& t) { return t.trace.schedule == m.schedule; });
      if (trace == traces.end()) return std::nullopt;
      const Replay replay =
          ReplayRun(measured, measured.path, trace->trace, trace->path, {}, schedules::kDefaultMaxOps);
      return schedules::SplitError(p, replay.predictions.front().metrics, m);
    };
  }
  CompareCommon(predicted, measured, options.max_error_pct, split_of, &r);
  const std::string common_summary = std::move(r.summary);
  r.summary.clear();
  if (measured.partial) AddPartial(std::move(partial), &r);
  r.text += "\n" + fmt::format(kSummaryFormat, "schedule", "step pred ms", "measured ms", "error", "spread",
                                "bubble pred", "measured", "error");
  r.text += common_summary + r.summary;
  if (!only_predicted.empty()) r.text += fmt::format("only in predicted: {}\n", fmt::join(only_predicted, ", "));
  if (!only_measured.empty()) r.text += fmt::format("only in measured: {}\n", fmt::join(only_measured, ", "));
  if (partial_compared) r.text += fmt::format("* partial: {} did not finish its steps\n", measured.partial->schedule);
  r.text += fmt::format("worst step-time error: {} ({})\n", ErrorText(r.worst_error_pct, "%"), r.worst);
  if (options.max_error_pct >= 0) {
    r.text += r.exceeded.empty() ? fmt::format("all step-time errors within {:.1f}%\n", options.max_error_pct)
                                 : fmt::format("step-time error above {:.1f}%: {}\n", options.max_error_pct,
                                               fmt::join(r.exceeded_text, ", "));
  }
  JsonOut out;
  out.StartObject().Key("predicted_file").String(predicted.path).Key("measured_file").String(measured.path);
  out.Key("schedules").StartArray();
  for (const std::string& schedule : r.schedules_json) out.Raw(schedule);
  out.EndArray();
  if (!r.partial_json.empty()) out.Key("partial").Raw(r.partial_json);
  out.Key("only_in_predicted").Strings(only_predicted);
  out.Key("only_in_measured").Strings(only_measured);
  out.Key("worst_step_time").StartObject().Key("schedule").String(r.worst);
  out.Key("error_pct").Number(r.worst_error_pct).EndObject();
  if (options.max_error_pct >= 0) {
    out.Key("max_error_pct").Number(options.max_error_pct).Key("exceeded").Strings(r.exceeded);
  }
  Comparison c;
  c.text = std::move(r.text);
  c.json = out.EndObject().Take() + "\n";
  c.worst = std::move(r.worst);
  c.worst_error_pct = r.worst_error_pct;
  c.exceeded = std::move(r.exceeded);
  return c;
}

}  // namespace stagecraft::harness
