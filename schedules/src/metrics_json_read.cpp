// Reading the metrics codec's JSON (see metrics_json.h) from RapidJSON's DOM (json_reader.h):
// one walk serves both reads. Strict (compare) turns a missing required key or a wrong type into
// an InputError naming the file and the key path; lenient (the viewer) keeps the default.
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

#include <fmt/format.h>

#include "metrics_json_detail.h"
#include "stagecraft/schedules/metrics_json.h"

namespace stagecraft::schedules {
namespace {

using Json = JsonValue;

enum class Mode { kStrict, kLenient };
enum class Need { kOptional, kRequired };  // kRequired: only the strict read requires it

// What one read shares: its mode, the file it names in errors, and how many fields it set.
struct ReadContext {
  Mode mode = Mode::kStrict;
  std::string_view source;
  int fields_read = 0;
};

// Typed access to the keys of one JSON object. Each getter sets *out and returns true when the
// key holds a usable value; otherwise it throws (strict) or leaves *out and returns false.
class FieldReader {
 public:
  // `where`: the key path of `value` ("schedules[1]"), "" for the file's root.
  FieldReader(const Json& value, ReadContext* context, std::string where)
      : context_(*context), where_(std::move(where)) {
    if (value.IsObject()) {
      object_ = &value;
    } else if (Strict()) {
      throw InputError(fmt::format("{}: {}expected an object (got {})", context_.source,
                                   where_.empty() ? "" : where_ + ": ", TypeName(value)));
    }
  }

  bool Strict() const { return context_.mode == Mode::kStrict; }

  [[noreturn]] void Fail(std::string_view key, std::string_view what) const {
    throw InputError(fmt::format("{}: {}{}: {}", context_.source, where_.empty() ? "" : where_ + ".", key, what));
  }

  bool String(const char* key, std::string* out, Need need = Need::kOptional) {
    const Json* j = Get(key, &Json::IsString, "a string", need);
    return j != nullptr && Set(out, std::string(StringOf(*j)));
  }
  // A time, a rate or a fraction: a number >= 0.
  bool NonNegative(const char* key, double* out, Need need = Need::kOptional) {
    const Json* j = Get(key, &Json::IsNumber, "a number", need);
    if (j == nullptr) return false;
    if (j->GetDouble() < 0) return Reject(key, fmt::format("expected a non-negative number (got {})", NumberText(*j)));
    return Set(out, j->GetDouble());
  }
  // A share of a whole: a number from 0 to 1.
  bool Fraction(const char* key, double* out, Need need = Need::kOptional) {
    double value = 0;
    if (!NonNegative(key, &value, need)) return false;
    if (value > 1) {
      const Json& j = *FindMember(*object_, key);
      return Reject(key, fmt::format("expected a fraction from 0 to 1 (got {})", NumberText(j)));
    }
    *out = value;
    return true;
  }
  bool Bool(const char* key, bool* out) {
    const Json* j = Get(key, &Json::IsBool, "a boolean", Need::kOptional);
    return j != nullptr && Set(out, j->GetBool());
  }
  // An integer in [min, INT32_MAX].
  bool Int(const char* key, int* out, int64_t min, Need need = Need::kOptional) {
    const Json* j = Get(key, &IsInteger, "an integer", need);
    if (j == nullptr) return false;
    if (!j->IsInt64() || j->GetInt64() < min || j->GetInt64() > INT32_MAX) {
      const char* kind = min == 1 ? "a positive" : "a non-negative";
      return Reject(key, fmt::format("expected {} integer (got {})", kind, NumberText(*j)));
    }
    return Set(out, static_cast<int>(j->GetInt64()));
  }
  // A byte count: an integer, or a whole number written as a float (1e9) that fits.
  bool Bytes(const char* key, int64_t* out) {
    const Json* j = Get(key, &Json::IsNumber, "a number of bytes", Need::kOptional);
    if (j == nullptr) return false;
    const double d = j->GetDouble();
    const bool ok = !IsInteger(*j) ? std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9.2e18 : j->IsInt64();
    if (!ok) return Reject(key, fmt::format("expected a whole number of bytes (got {})", NumberText(*j)));
    return Set(out, IsInteger(*j) ? j->GetInt64() : static_cast<int64_t>(d));
  }
  // A list of numbers (of times >= 0 when `times`); a list with anything else is not used at all
  // (indices mean steps or ranks).
  bool Numbers(const char* key, std::vector<double>* out, bool times = false) {
    const Json* j = Get(key, &Json::IsArray, "an array", Need::kOptional);
    if (j == nullptr) return false;
    std::vector<double> values;
    for (rapidjson::SizeType i = 0; i < j->Size(); ++i) {
      const Json& value = (*j)[i];
      if (!value.IsNumber()) {
        return Reject(fmt::format("{}[{}]", key, i), fmt::format("expected a number (got {})", TypeName(value)));
      }
      if (times && value.GetDouble() < 0) {
        return Reject(fmt::format("{}[{}]", key, i),
                      fmt::format("expected a non-negative number (got {})", NumberText(value)));
      }
      values.push_back(value.GetDouble());
    }
    return Set(out, std::move(values));
  }
  const Json* Array(const char* key, Need need = Need::kOptional) {
    const Json* j = Get(key, &Json::IsArray, "an array", need);
    if (j != nullptr) ++context_.fields_read;
    return j;
  }

  // Whether `key` holds null (what a run did not reach: execute's target_reached_step).
  bool Null(const char* key) {
    const Json* value = object_ == nullptr ? nullptr : FindMember(*object_, key);
    if (value == nullptr || !value->IsNull()) return false;
    ++context_.fields_read;
    return true;
  }

  // A key whose value is not usable. Strict: throws "key: what". Lenient: returns false.
  bool Reject(std::string_view key, std::string_view what) const {
    if (Strict()) Fail(key, what);
    return false;
  }

 private:
  template <typename T, typename V>
  bool Set(T* out, V&& value) {
    *out = std::forward<V>(value);
    ++context_.fields_read;
    return true;
  }

  // The value of `key` when it passes `is`.
  template <typename Is>
  const Json* Get(const char* key, Is is, std::string_view expected, Need need) const {
    if (object_ == nullptr) return nullptr;
    const Json* value = FindMember(*object_, key);
    if (value == nullptr) {
      if (Strict() && need == Need::kRequired) Fail(key, fmt::format("missing (expected {})", expected));
      return nullptr;
    }
    if (!std::invoke(is, *value)) {
      Reject(key, fmt::format("expected {} (got {})", expected, TypeName(*value)));
      return nullptr;
    }
    return value;
  }

  ReadContext& context_;
  const Json* object_ = nullptr;
  std::string where_;
};

RankMetrics ReadRank(const Json& value, ReadContext* context, std::string where, int index) {
  FieldReader r(value, context, std::move(where));
  RankMetrics rank;
  rank.rank = index;
  r.Int("rank", &rank.rank, 0);
  r.NonNegative("busy_ms", &rank.busy_ms, Need::kRequired);
  r.NonNegative("span_ms", &rank.span_ms);
  r.NonNegative("compute_ms", &rank.compute_ms);
  r.NonNegative("wait_ms", &rank.wait_ms);
  r.NonNegative("transfer_ms", &rank.transfer_ms);
  r.NonNegative("collective_ms", &rank.collective_ms);  // absent with one replica: 0
  r.NonNegative("offload_wait_ms", &rank.offload_wait_ms);  // absent without copies: 0
  r.NonNegative("overhead_ms", &rank.overhead_ms);
  r.NonNegative("idle_ms", &rank.idle_ms);
  r.Bytes("peak_memory_bytes", &rank.peak_memory_bytes);
  r.Int("peak_inflight_microbatches", &rank.peak_inflight_microbatches, 0);
  r.Int("peak_weight_versions", &rank.peak_weight_versions, 0);
  r.Bytes("peak_host_memory_bytes", &rank.peak_host_memory_bytes);      // absent: no copies
  r.Bytes("device_peak_memory_bytes", &rank.device_peak_memory_bytes);  // absent: the device is its own
  r.Int("device", &rank.device, 0);                                      // absent: the device is its own
  r.Bool("oom", &rank.oom);
  return rank;
}

// The executor's fields, when any is there.
std::optional<ExecutorMetrics> ReadExecutor(FieldReader& r) {
  ExecutorMetrics e;
  bool any = r.Numbers("losses", &e.losses);
  any |= r.Numbers("step_ms", &e.step_ms, /*times=*/true);
  any |= r.NonNegative("overhead_ns_per_op", &e.overhead_ns_per_op);
  double target = 0;
  if (r.NonNegative("target_loss", &target)) {
    any = true;
    e.target_loss = target;
    r.Int("loss_window", &e.loss_window, 1);
    if (!r.Null("target_reached_step") && r.Int("target_reached_step", &e.target_reached_step, 0)) {
      r.NonNegative("time_to_target_ms", &e.time_to_target_ms, Need::kRequired);
    }
  }
  return any ? std::optional<ExecutorMetrics>(std::move(e)) : std::nullopt;
}

ScheduleMetrics ReadSchedule(const Json& value, ReadContext* context, const std::string& where) {
  FieldReader r(value, context, where);
  ScheduleMetrics m;
  const auto control = [](char c) { return c >= 0 && c < ' '; };
  if (r.String("schedule", &m.schedule, Need::kRequired) &&
      (m.schedule.empty() || std::any_of(m.schedule.begin(), m.schedule.end(), control))) {
    r.Reject("schedule", "expected a non-empty name without control characters");
  }
  r.Int("ranks", &m.ranks, 1, Need::kRequired);
  r.Int("chunks", &m.chunks, 1);
  r.Int("microbatches", &m.microbatches, 1, Need::kRequired);
  r.Int("microbatch_size", &m.microbatch_size, 1, Need::kRequired);
  r.Int("steps", &m.steps, 1, Need::kRequired);
  r.Int("data_parallel", &m.data_parallel, 1);
  if (r.NonNegative("makespan_ms", &m.makespan_ms)) m.makespan_ns = std::llround(m.makespan_ms * 1e6);
  r.NonNegative("step_time_ms", &m.step_time_ms, Need::kRequired);
  r.NonNegative("throughput_samples_per_s", &m.throughput_samples_per_s, Need::kRequired);
  r.Fraction("bubble_fraction", &m.bubble_fraction, Need::kRequired);
  r.NonNegative("model_tflops_per_device", &m.model_tflops_per_device);  // absent: not known
  bool any_oom = false;
  r.Bool("oom", &any_oom);  // derived from per_rank; checked, not kept
  if (const Json* per_rank = r.Array("per_rank", Need::kRequired)) {
    if (per_rank->Size() != static_cast<size_t>(m.ranks)) {
      r.Reject("per_rank", fmt::format("expected {} entries (ranks), got {}", m.ranks, per_rank->Size()));
    }
    for (rapidjson::SizeType i = 0; i < per_rank->Size(); ++i) {
      m.ranks_detail.push_back(
          ReadRank((*per_rank)[i], context, fmt::format("{}.per_rank[{}]", where, i), static_cast<int>(i)));
    }
  }
  if (const Json* stages = r.Array("stages", Need::kOptional)) {
    for (rapidjson::SizeType i = 0; i < stages->Size(); ++i) {
      FieldReader c((*stages)[i], context, fmt::format("{}.stages[{}]", where, i));
      StageCostMetrics cost;
      int stage = static_cast<int>(i);
      c.Int("stage", &stage, 0);
      if (stage != static_cast<int>(i)) c.Reject("stage", fmt::format("expected {} (stages in order)", i));
      for (const StageCostField& f : kStageCostFields) c.NonNegative(f.key, &(cost.*f.field), Need::kRequired);
      m.stage_costs.push_back(cost);
      // The weight delays (staleness.h), stated by every stage or by none (a file from before them).
      StageDelay delay;
      delay.stage = static_cast<int>(i);
      const bool forward = c.Int("weight_delay_forward", &delay.forward, 0);
      const bool backward = c.Int("weight_delay_backward", &delay.backward, 0);
      c.Bool("weight_versions_differ", &delay.differ);
      const bool in_step = forward ? m.weight_delays.size() == i : m.weight_delays.empty();
      if (forward != backward || !in_step) {
        c.Reject(forward ? "weight_delay_backward" : "weight_delay_forward",
                 "expected weight_delay_forward and weight_delay_backward on every stage or on none");
      } else if (forward) {
        m.weight_delays.push_back(delay);
      }
    }
  }
  m.executor = ReadExecutor(r);
  return m;
}

// A partial run's progress (metrics.h): its counts must agree with the file it is in.
PartialRun ReadPartial(const Json& value, ReadContext* context, const MetricsFile& file) {
  FieldReader r(value, context, "partial");
  PartialRun p;
  r.Int("schedules_done", &p.schedules_done, 0, Need::kRequired);
  r.Int("schedules_total", &p.schedules_total, 1, Need::kRequired);
  r.String("schedule", &p.schedule);
  r.Int("steps", &p.steps, 0, Need::kRequired);
  r.Numbers("losses", &p.losses);
  r.Numbers("step_ms", &p.step_ms, /*times=*/true);
  if (p.schedules_done != static_cast<int>(file.schedules.size())) {
    r.Fail("schedules_done", fmt::format("{} but the file holds {} schedule(s)", p.schedules_done, file.schedules.size()));
  }
  if (p.schedules_done > p.schedules_total) {
    r.Fail("schedules_done", fmt::format("{} is more than schedules_total {}", p.schedules_done, p.schedules_total));
  }
  if (p.losses.size() != p.step_ms.size() || p.step_ms.size() > static_cast<size_t>(p.steps)) {
    r.Fail("step_ms", fmt::format("{} step time(s) and {} loss(es) for {} step(s)", p.step_ms.size(), p.losses.size(),
                                  p.steps));
  }
  return p;
}

// A multi-model workload's placement (metrics.h): one task per schedule of the file.
WorkloadMetrics ReadWorkload(const Json& value, ReadContext* context, const MetricsFile& file) {
  FieldReader r(value, context, "workload");
  WorkloadMetrics l;
  r.String("scheduler", &l.scheduler, Need::kRequired);
  if (l.scheduler != "lrtf" && l.scheduler != "sequential") {
    r.Fail("scheduler", fmt::format("expected lrtf or sequential (got '{}')", l.scheduler));
  }
  r.NonNegative("makespan_ms", &l.makespan_ms, Need::kRequired);
  r.NonNegative("lrtf_makespan_ms", &l.lrtf_makespan_ms, Need::kRequired);
  r.NonNegative("sequential_makespan_ms", &l.sequential_makespan_ms, Need::kRequired);
  r.Numbers("device_busy_fraction", &l.device_busy_fraction, /*times=*/true);
  for (size_t i = 0; i < l.device_busy_fraction.size(); ++i) {
    if (l.device_busy_fraction[i] > 1) {
      r.Fail(fmt::format("device_busy_fraction[{}]", i), fmt::format("{} is more than 1", l.device_busy_fraction[i]));
    }
  }
  const Json& tasks = *r.Array("tasks", Need::kRequired);
  for (rapidjson::SizeType i = 0; i < tasks.Size(); ++i) {
    FieldReader t(tasks[i], context, fmt::format("workload.tasks[{}]", i));
    WorkloadMetrics::Task task;
    t.String("name", &task.name, Need::kRequired);
    t.String("schedule", &task.schedule, Need::kRequired);
    t.Int("devices", &task.devices, 1, Need::kRequired);
    t.Int("steps", &task.steps, 1, Need::kRequired);
    t.Bool("moves", &task.moves);
    t.NonNegative("alone_ms", &task.alone_ms, Need::kRequired);
    t.NonNegative("start_ms", &task.start_ms, Need::kRequired);
    t.NonNegative("end_ms", &task.end_ms, Need::kRequired);
    if (task.end_ms < task.start_ms) t.Fail("end_ms", fmt::format("{} is before start_ms {}", task.end_ms, task.start_ms));
    l.tasks.push_back(std::move(task));
  }
  if (l.tasks.size() != file.schedules.size()) {
    r.Fail("tasks", fmt::format("{} task(s) but the file holds {} schedule(s), one per task", l.tasks.size(),
                                file.schedules.size()));
  }
  return l;
}

// The file parsed, or an InputError "source: not valid JSON (byte N): what at line L, column
// C", N counted from 1; a number beyond a double is "number overflow parsing 'X'" instead.
void Parse(std::string_view text, std::string_view source, rapidjson::Document* root) {
  JsonSyntaxError e;
  if (ParseJson(text, root, &e)) return;
  if (!e.overflow.empty()) throw InputError(fmt::format("{}: not valid JSON: {}", source, e.Located()));
  throw InputError(fmt::format("{}: not valid JSON (byte {}): {} at line {}, column {}", source, e.offset + 1, e.what,
                               e.line, e.column));
}

}  // namespace

MetricsFile MetricsFileFromJson(std::string_view text, std::string_view source) {
  rapidjson::Document root;
  Parse(text, source, &root);
  ReadContext context{Mode::kStrict, source};
  FieldReader r(root, &context, "");
  MetricsFile file;
  r.String("scenario", &file.scenario);
  r.String("source", &file.source);
  if (std::string costs; r.String("costs", &costs)) file.costs = costs;
  if (std::string backend; r.String("backend", &backend)) file.backend = backend;
  if (std::string precision; r.String("precision", &precision)) file.precision = precision;
  if (std::string scenario_file; r.String("scenario_file", &scenario_file)) file.scenario_file = scenario_file;
  if (const Json* overrides = r.Array("overrides")) {
    for (rapidjson::SizeType i = 0; i < overrides->Size(); ++i) {
      if (!(*overrides)[i].IsString()) {
        r.Fail(fmt::format("overrides[{}]", i), fmt::format("expected a string (got {})", TypeName((*overrides)[i])));
      }
      file.overrides.emplace_back((*overrides)[i].GetString(), (*overrides)[i].GetStringLength());
    }
  }
  const Json& schedules = *r.Array("schedules", Need::kRequired);
  for (rapidjson::SizeType i = 0; i < schedules.Size(); ++i) {
    const std::string where = fmt::format("schedules[{}]", i);
    ScheduleMetrics s = ReadSchedule(schedules[i], &context, where);
    if (file.Find(s.schedule) != nullptr) r.Fail(where, fmt::format("schedule '{}' appears twice", s.schedule));
    file.schedules.push_back(std::move(s));
  }
  if (const Json* partial = FindMember(root, "partial")) file.partial = ReadPartial(*partial, &context, file);
  if (const Json* workload = FindMember(root, "workload")) file.workload = ReadWorkload(*workload, &context, file);
  return file;
}

std::optional<ScheduleMetrics> ScheduleMetricsFromValueLenient(const Json& value) {
  ReadContext context{Mode::kLenient, ""};
  ScheduleMetrics m = ReadSchedule(value, &context, "");
  if (context.fields_read == 0) return std::nullopt;
  return m;
}

std::optional<ScheduleMetrics> ScheduleMetricsFromJsonLenient(std::string_view text) {
  rapidjson::Document value;
  JsonSyntaxError error;
  if (!ParseJson(text, &value, &error)) return std::nullopt;
  return ScheduleMetricsFromValueLenient(value);
}

}  // namespace stagecraft::schedules
