// `stagecraft compare`: set the metrics JSON of `simulate --json` (predicted) beside that of
// `execute --json` (measured), schedule by schedule, and report the signed relative errors
// (predicted − measured) / measured; optionally fail when a step-time error is too large.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "stagecraft/base/atomic_file.h"
#include "stagecraft/base/error.h"
#include "stagecraft/schedules/ir.h"
#include "stagecraft/schedules/trace.h"

namespace stagecraft::cli {
namespace {

using stagecraft::InputError;
using Json = nlohmann::json;
using OrderedJson = nlohmann::ordered_json;

constexpr int kExceededExitCode = 3;

// CLI11's own range check prints the largest double in its message; this one reads plainly.
const CLI::Validator kNonNegativePercent(
    [](std::string& text) {
      double pct = 0;
      return CLI::detail::lexical_cast(text, pct) && pct >= 0 ? std::string()
                                                              : "expected a percentage >= 0, got " + text;
    },
    "");

struct CompareFlags {
  std::string predicted_path;
  std::string measured_path;
  std::string json_path;
  double max_error_pct = -1;  // negative: no limit
};

// One schedule's metrics as one file gives them; keys this command does not use are ignored.
struct ScheduleEntry {
  std::string name;
  int ranks = 0, microbatches = 0, microbatch_size = 0, steps = 0;
  double step_time_ms = 0, throughput_samples_per_s = 0, bubble_fraction = 0;
  std::vector<double> busy_ms;  // per rank
  std::vector<double> losses;   // mean loss per step; measured files only, empty when absent
};

struct MetricsFile {
  std::string path;
  std::string scenario;  // empty when the file names none
  std::vector<ScheduleEntry> schedules;

  const ScheduleEntry* Find(const std::string& name) const {
    for (const ScheduleEntry& s : schedules) {
      if (s.name == name) return &s;
    }
    return nullptr;
  }
};

// Typed access to the keys of one JSON object; every error names the file and the key path,
// e.g. "measured.json: schedules[1].step_time_ms: expected a number (got string)".
class FieldReader {
 public:
  FieldReader(const std::string& path, const Json& object, std::string where)
      : path_(path), object_(object), where_(std::move(where)) {
    if (!object_.is_object()) {
      throw InputError(fmt::format("{}: {}expected an object (got {})", path_, where_.empty() ? "" : where_ + ": ",
                                   object_.type_name()));
    }
  }

  [[noreturn]] void Fail(std::string_view key, std::string_view what) const {
    throw InputError(fmt::format("{}: {}{}: {}", path_, where_.empty() ? "" : where_ + ".", key, what));
  }
  bool Has(const char* key) const { return object_.contains(key); }

  const Json& Get(const char* key, bool (Json::*is)() const noexcept, std::string_view expected) const {
    const auto it = object_.find(key);
    if (it == object_.end()) Fail(key, fmt::format("missing (expected {})", expected));
    if (!((*it).*is)()) Fail(key, fmt::format("expected {} (got {})", expected, it->type_name()));
    return *it;
  }
  double Number(const char* key) const { return Get(key, &Json::is_number, "a number").get<double>(); }
  std::string String(const char* key) const { return Get(key, &Json::is_string, "a string").get<std::string>(); }
  const Json& Array(const char* key) const { return Get(key, &Json::is_array, "an array"); }
  int PositiveInt(const char* key) const {
    const Json& j = Get(key, &Json::is_number_integer, "an integer");
    // nlohmann stores non-negative integers as unsigned and negative ones as signed.
    const bool ok = j.is_number_unsigned() && j.get<uint64_t>() >= 1 && j.get<uint64_t>() <= INT32_MAX;
    if (!ok) Fail(key, fmt::format("expected a positive integer (got {})", j.dump()));
    return static_cast<int>(j.get<uint64_t>());
  }

 private:
  const std::string& path_;
  const Json& object_;
  std::string where_;
};

ScheduleEntry ReadScheduleEntry(const std::string& path, const Json& json, int index) {
  const FieldReader r(path, json, fmt::format("schedules[{}]", index));
  ScheduleEntry s;
  s.name = r.String("schedule");
  if (s.name.empty() || std::any_of(s.name.begin(), s.name.end(), [](char c) { return c >= 0 && c < ' '; })) {
    r.Fail("schedule", "expected a non-empty name without control characters");
  }
  s.ranks = r.PositiveInt("ranks");
  s.microbatches = r.PositiveInt("microbatches");
  s.microbatch_size = r.PositiveInt("microbatch_size");
  s.steps = r.PositiveInt("steps");
  s.step_time_ms = r.Number("step_time_ms");
  if (!(s.step_time_ms > 0)) r.Fail("step_time_ms", "must be > 0");
  s.throughput_samples_per_s = r.Number("throughput_samples_per_s");
  s.bubble_fraction = r.Number("bubble_fraction");
  const Json& per_rank = r.Array("per_rank");
  if (per_rank.size() != static_cast<size_t>(s.ranks)) {
    r.Fail("per_rank", fmt::format("expected {} entries (ranks), got {}", s.ranks, per_rank.size()));
  }
  for (size_t i = 0; i < per_rank.size(); ++i) {
    const std::string where = fmt::format("schedules[{}].per_rank[{}]", index, i);
    s.busy_ms.push_back(FieldReader(path, per_rank[i], where).Number("busy_ms"));
  }
  if (r.Has("losses")) {
    const Json& losses = r.Array("losses");
    for (size_t i = 0; i < losses.size(); ++i) {
      if (!losses[i].is_number()) r.Fail(fmt::format("losses[{}]", i), "expected a number");
      s.losses.push_back(losses[i].get<double>());
    }
  }
  return s;
}

Json ParseFile(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) throw InputError(fmt::format("{}: is a directory, not a file", path));
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(fmt::format("{}: cannot open file", path));
  const std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  try {
    return Json::parse(text);
  } catch (const Json::parse_error& e) {
    std::string what = e.what();  // "[json.exception.parse_error.101] parse error at line 1, ..."
    if (const size_t bracket = what.find("] "); what.starts_with("[json.") && bracket != std::string::npos) {
      what.erase(0, bracket + 2);
    }
    throw InputError(fmt::format("{}: not valid JSON (byte {}): {}", path, e.byte, what));
  }
}

MetricsFile ReadMetricsFile(const std::string& path) {
  const Json root = ParseFile(path);
  const FieldReader r(path, root, "");
  MetricsFile file;
  file.path = path;
  if (r.Has("scenario")) file.scenario = r.String("scenario");
  const Json& schedules = r.Array("schedules");
  for (size_t i = 0; i < schedules.size(); ++i) {
    ScheduleEntry s = ReadScheduleEntry(path, schedules[i], static_cast<int>(i));
    if (file.Find(s.name) != nullptr) {
      r.Fail(fmt::format("schedules[{}]", i), fmt::format("schedule '{}' appears twice", s.name));
    }
    file.schedules.push_back(std::move(s));
  }
  return file;
}

// Signed relative error in percent; none when the measured value is 0 and the predicted is not.
std::optional<double> ErrorPct(double predicted, double measured) {
  if (measured == 0) return predicted == 0 ? std::optional<double>(0.0) : std::nullopt;
  return 100.0 * (predicted - measured) / measured;
}

// "+10.0%", "-5.0 pp", "0.0%" (no sign on zero, so never "-0.0"), "n/a".
std::string ErrorText(std::optional<double> error, std::string_view unit) {
  if (!error) return "n/a";
  if (std::round(*error * 10) == 0) return fmt::format("0.0{}", unit);
  return fmt::format("{:+.1f}{}", *error, unit);
}

OrderedJson ErrorJson(double predicted, double measured, std::optional<double> error, const char* error_key) {
  OrderedJson j{{"predicted", predicted}, {"measured", measured}};
  j[error_key] = error ? OrderedJson(*error) : OrderedJson(nullptr);
  return j;
}

constexpr std::string_view kRowFormat = "  {:<24} {:>12} {:>12} {:>9}\n";

std::string Row(std::string_view metric, double predicted, double measured, int decimals, std::string_view error) {
  return fmt::format(kRowFormat, metric, fmt::format("{:.{}f}", predicted, decimals),
                     fmt::format("{:.{}f}", measured, decimals), error);
}

std::string Shape(const ScheduleEntry& s) {
  return fmt::format("{} ranks, {} microbatches x {} samples, {} step(s)", s.ranks, s.microbatches, s.microbatch_size,
                     s.steps);
}

// The text block and the JSON object of one schedule found in both files.
void CompareOne(const ScheduleEntry& p, const ScheduleEntry& m, std::string* text, OrderedJson* json) {
  const auto step = ErrorPct(p.step_time_ms, m.step_time_ms);
  const auto throughput = ErrorPct(p.throughput_samples_per_s, m.throughput_samples_per_s);
  const double bubble_pp = 100 * (p.bubble_fraction - m.bubble_fraction);
  *text += fmt::format("{}: {}\n", p.name, Shape(p));
  if (Shape(p) != Shape(m)) *text += fmt::format("  note: measured with {}\n", Shape(m));
  *text += fmt::format(kRowFormat, "metric", "predicted", "measured", "error");
  *text += Row("step time (ms)", p.step_time_ms, m.step_time_ms, 3, ErrorText(step, "%"));
  *text += Row("throughput (samples/s)", p.throughput_samples_per_s, m.throughput_samples_per_s, 1,
               ErrorText(throughput, "%"));
  *text += Row("bubble (%)", 100 * p.bubble_fraction, 100 * m.bubble_fraction, 2, ErrorText(bubble_pp, " pp"));
  OrderedJson ranks = OrderedJson::array();
  for (size_t r = 0; r < p.busy_ms.size(); ++r) {
    const auto busy = ErrorPct(p.busy_ms[r], m.busy_ms[r]);
    *text += Row(fmt::format("rank {} busy (ms)", r), p.busy_ms[r], m.busy_ms[r], 3, ErrorText(busy, "%"));
    ranks.push_back({{"rank", r}, {"busy_ms", ErrorJson(p.busy_ms[r], m.busy_ms[r], busy, "error_pct")}});
  }
  *json = {{"schedule", p.name},
           {"ranks", p.ranks},
           {"microbatches", p.microbatches},
           {"microbatch_size", p.microbatch_size},
           {"steps", p.steps},
           {"step_time_ms", ErrorJson(p.step_time_ms, m.step_time_ms, step, "error_pct")},
           {"throughput_samples_per_s",
            ErrorJson(p.throughput_samples_per_s, m.throughput_samples_per_s, throughput, "error_pct")},
           {"bubble_fraction", ErrorJson(p.bubble_fraction, m.bubble_fraction, bubble_pp, "error_pp")},
           {"per_rank", ranks}};
  if (!m.losses.empty()) {
    *text += fmt::format("  loss (measured): first {:.6g}, last {:.6g} over {} step(s)\n", m.losses.front(),
                         m.losses.back(), m.losses.size());
    (*json)["losses"] = {{"first", m.losses.front()}, {"last", m.losses.back()}};
  }
}

// The names of `a`'s schedules that `b` lacks, in `a`'s order.
std::vector<std::string> OnlyIn(const MetricsFile& a, const MetricsFile& b) {
  std::vector<std::string> names;
  for (const ScheduleEntry& s : a.schedules) {
    if (b.Find(s.name) == nullptr) names.push_back(s.name);
  }
  return names;
}

std::string FileLine(const char* label, const MetricsFile& f) {
  return fmt::format("{:<10} {}{}\n", label, f.path,
                     f.scenario.empty() ? "" : fmt::format(" (scenario {})", f.scenario));
}

struct Report {
  std::string text;
  OrderedJson json;
  std::string worst;  // the schedule with the largest |step-time error|
  double worst_error_pct = 0;
  std::vector<std::string> exceeded;       // schedules whose |step-time error| is over --max-error
  std::vector<std::string> exceeded_text;  // the same with their errors: "1f1b (+10.0%)"
  std::string summary;                     // one row per schedule, printed after the blocks
};

constexpr std::string_view kSummaryFormat = "{:<12} {:>12} {:>12} {:>8}   {:>11} {:>9} {:>8}\n";

// One block per schedule found in both files, in the predicted file's order.
void CompareCommon(const MetricsFile& predicted, const MetricsFile& measured, double max_error_pct, Report* report) {
  for (const ScheduleEntry& p : predicted.schedules) {
    const ScheduleEntry* m = measured.Find(p.name);
    if (m == nullptr) continue;
    if (p.busy_ms.size() != m->busy_ms.size()) {
      throw InputError(fmt::format("{}: schedule {} has {} ranks in per_rank but {} in {}", measured.path, p.name,
                                   m->busy_ms.size(), p.busy_ms.size(), predicted.path));
    }
    OrderedJson entry;
    report->text += "\n";
    CompareOne(p, *m, &report->text, &entry);
    report->json["schedules"].push_back(std::move(entry));
    const double error = *ErrorPct(p.step_time_ms, m->step_time_ms);  // measured step time is > 0
    report->summary += fmt::format(kSummaryFormat, p.name, fmt::format("{:.3f}", p.step_time_ms),
                                   fmt::format("{:.3f}", m->step_time_ms), ErrorText(error, "%"),
                                   fmt::format("{:.2f}%", 100 * p.bubble_fraction),
                                   fmt::format("{:.2f}%", 100 * m->bubble_fraction),
                                   ErrorText(100 * (p.bubble_fraction - m->bubble_fraction), " pp"));
    if (report->worst.empty() || std::abs(error) > std::abs(report->worst_error_pct)) {
      report->worst = p.name;
      report->worst_error_pct = error;
    }
    if (max_error_pct >= 0 && std::abs(error) > max_error_pct) {
      report->exceeded.push_back(p.name);
      report->exceeded_text.push_back(fmt::format("{} ({})", p.name, ErrorText(error, "%")));
    }
  }
}

int Run(const CompareFlags& f) {
  const MetricsFile predicted = ReadMetricsFile(f.predicted_path);
  const MetricsFile measured = ReadMetricsFile(f.measured_path);
  const std::vector<std::string> only_predicted = OnlyIn(predicted, measured);
  const std::vector<std::string> only_measured = OnlyIn(measured, predicted);
  if (only_predicted.size() == predicted.schedules.size()) {
    throw InputError(fmt::format("no schedule in common: {} has [{}], {} has [{}]", predicted.path,
                                 fmt::join(only_predicted, ", "), measured.path, fmt::join(only_measured, ", ")));
  }
  // Everything is checked and computed before anything is written or printed.
  Report r;
  r.text = FileLine("predicted:", predicted) + FileLine("measured:", measured);
  r.json = {{"predicted_file", predicted.path}, {"measured_file", measured.path}, {"schedules", OrderedJson::array()}};
  CompareCommon(predicted, measured, f.max_error_pct, &r);
  r.text += "\n" + fmt::format(kSummaryFormat, "schedule", "step pred ms", "measured ms", "error", "bubble pred",
                                "measured", "error");
  r.text += r.summary;
  if (!only_predicted.empty()) r.text += fmt::format("only in predicted: {}\n", fmt::join(only_predicted, ", "));
  if (!only_measured.empty()) r.text += fmt::format("only in measured: {}\n", fmt::join(only_measured, ", "));
  r.text += fmt::format("worst step-time error: {} ({})\n", ErrorText(r.worst_error_pct, "%"), r.worst);
  r.json["only_in_predicted"] = only_predicted;
  r.json["only_in_measured"] = only_measured;
  r.json["worst_step_time"] = {{"schedule", r.worst}, {"error_pct", r.worst_error_pct}};
  if (f.max_error_pct >= 0) {
    r.text += r.exceeded.empty() ? fmt::format("all step-time errors within {:.1f}%\n", f.max_error_pct)
                                 : fmt::format("step-time error above {:.1f}%: {}\n", f.max_error_pct,
                                               fmt::join(r.exceeded_text, ", "));
    r.json["max_error_pct"] = f.max_error_pct;
    r.json["exceeded"] = r.exceeded;
  }
  if (!f.json_path.empty())
    stagecraft::WriteTextFileAtomically(f.json_path, r.json.dump(-1, ' ', false, Json::error_handler_t::replace) + "\n");
  std::fwrite(r.text.data(), 1, r.text.size(), stdout);
  return r.exceeded.empty() ? 0 : kExceededExitCode;
}

}  // namespace

Command AddCompareCommand(CLI::App& root) {
  auto flags = std::make_shared<CompareFlags>();
  CLI::App* app =
      root.add_subcommand("compare", "Compare predicted (simulate --json) and measured (execute --json) metrics");
  app->add_option("predicted", flags->predicted_path, "Metrics JSON written by `stagecraft simulate --json`")
      ->required();
  app->add_option("measured", flags->measured_path, "Metrics JSON written by `stagecraft execute --json`")->required();
  app->add_option("--max-error", flags->max_error_pct, "Exit with code 3 when a step-time error exceeds PCT percent")
      ->check(kNonNegativePercent)
      ->type_name("PCT");
  app->add_option("--json", flags->json_path, "Write the comparison as JSON");
  return {app, [flags] { return Run(*flags); }};
}

}  // namespace stagecraft::cli
