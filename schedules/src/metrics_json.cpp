// Writing the metrics codec's JSON (see metrics_json.h) through RapidJSON: the library emits
// the structure and escapes the strings; each number's text comes from its fixed format.
#include "stagecraft/schedules/metrics_json.h"

#include <charconv>
#include <cmath>
#include <initializer_list>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "metrics_json_detail.h"

namespace stagecraft::schedules {
namespace {

// The text formats of the metrics' numbers (metrics_json.h).
enum class Format {
  kFixed6,       // times in ms and throughput: {:.6f}
  kFixed9,       // bubble fraction: {:.9f}
  kSignificant9, // losses: {:.9g}
  kFixed1,       // overhead_ns_per_op: {:.1f}
};

struct NumberMember {
  std::string_view key;
  double value;
  Format format;
};
struct ListMember {
  std::string_view key;
  const std::vector<double>& values;
  Format format;
};

// `value` as `format` writes it, into `text`; returns its length.
size_t FormatNumber(double value, Format format, char (&text)[64]) {
  switch (format) {
    case Format::kFixed6:
      return fmt::format_to_n(text, sizeof text, "{:.6f}", value).size;
    case Format::kFixed9:
      return fmt::format_to_n(text, sizeof text, "{:.9f}", value).size;
    case Format::kSignificant9:
      return fmt::format_to_n(text, sizeof text, "{:.9g}", value).size;
    case Format::kFixed1:
      break;
  }
  return fmt::format_to_n(text, sizeof text, "{:.1f}", value).size;
}

class MetricsWriter {
 public:
  MetricsWriter(JsonWriter* writer, NumberForm form) : w_(*writer), form_(form) {}

  void Schedule(const ScheduleMetrics& m) {
    w_.StartObject();
    WriteMembers(w_, {{"schedule", m.schedule}});
    WriteMembers(w_, {{"ranks", m.ranks}, {"chunks", m.chunks}, {"microbatches", m.microbatches},
                      {"microbatch_size", m.microbatch_size}, {"steps", m.steps}});
    // Written only with replicas, as collective_ms: a one-replica file stays as it was.
    const bool replicas = m.data_parallel > 1;
    if (replicas) WriteMembers(w_, {{"data_parallel", m.data_parallel}});
    Members({{"makespan_ms", m.makespan_ms, Format::kFixed6},
             {"step_time_ms", m.step_time_ms, Format::kFixed6},
             {"throughput_samples_per_s", m.throughput_samples_per_s, Format::kFixed6},
             {"bubble_fraction", m.bubble_fraction, Format::kFixed9}});
    if (m.model_tflops_per_device > 0) {
      Members({{"model_tflops_per_device", m.model_tflops_per_device, Format::kFixed6}});
    }
    Key(w_, "oom");
    w_.Bool(m.AnyOom());
    Key(w_, "per_rank");
    w_.StartArray();
    for (const RankMetrics& r : m.ranks_detail) Rank(r, replicas);
    w_.EndArray();
    if (!m.stage_costs.empty()) {
      Key(w_, "stages");
      w_.StartArray();
      for (size_t i = 0; i < m.stage_costs.size(); ++i) {
        const StageCostMetrics& c = m.stage_costs[i];
        w_.StartObject();
        WriteMembers(w_, {{"stage", static_cast<int64_t>(i)}});
        for (const StageCostField& f : kStageCostFields) {
          Key(w_, f.key);
          Number(c.*f.field, Format::kFixed6);
        }
        if (m.weight_delays.size() == m.stage_costs.size()) {
          const StageDelay& d = m.weight_delays[i];
          WriteMembers(w_, {{"weight_delay_forward", d.forward}, {"weight_delay_backward", d.backward}});
          Key(w_, "weight_versions_differ");
          w_.Bool(d.differ);
        }
        w_.EndObject();
      }
      w_.EndArray();
    }
    if (const std::optional<ExecutorMetrics>& e = m.executor) {
      Lists({{"losses", e->losses, Format::kSignificant9}, {"step_ms", e->step_ms, Format::kFixed6}});
      Members({{"overhead_ns_per_op", e->overhead_ns_per_op, Format::kFixed1}});
      if (e->target_loss) {
        Members({{"target_loss", *e->target_loss, Format::kSignificant9}});
        WriteMembers(w_, {{"loss_window", e->loss_window}});
        if (e->target_reached_step < 0) {  // not reached: both null
          Key(w_, "target_reached_step");
          w_.Null();
          Key(w_, "time_to_target_ms");
          w_.Null();
        } else {
          WriteMembers(w_, {{"target_reached_step", e->target_reached_step}});
          Members({{"time_to_target_ms", e->time_to_target_ms, Format::kFixed6}});
        }
      }
    }
    w_.EndObject();
  }

  void Workload(const WorkloadMetrics& l) {
    w_.StartObject();
    WriteMembers(w_, {{"scheduler", l.scheduler}});
    Members({{"makespan_ms", l.makespan_ms, Format::kFixed6},
             {"lrtf_makespan_ms", l.lrtf_makespan_ms, Format::kFixed6},
             {"sequential_makespan_ms", l.sequential_makespan_ms, Format::kFixed6}});
    Lists({{"device_busy_fraction", l.device_busy_fraction, Format::kFixed6}});
    Key(w_, "tasks");
    w_.StartArray();
    for (const WorkloadMetrics::Task& t : l.tasks) {
      w_.StartObject();
      WriteMembers(w_, {{"name", t.name}, {"schedule", t.schedule}});
      WriteMembers(w_, {{"devices", t.devices}, {"steps", t.steps}});
      Key(w_, "moves");
      w_.Bool(t.moves);
      Members({{"alone_ms", t.alone_ms, Format::kFixed6},
               {"start_ms", t.start_ms, Format::kFixed6},
               {"end_ms", t.end_ms, Format::kFixed6}});
      w_.EndObject();
    }
    w_.EndArray();
    w_.EndObject();
  }

  void Partial(const PartialRun& p) {
    w_.StartObject();
    WriteMembers(w_, {{"schedules_done", p.schedules_done}, {"schedules_total", p.schedules_total}});
    if (!p.schedule.empty()) WriteMembers(w_, {{"schedule", p.schedule}});
    WriteMembers(w_, {{"steps", p.steps}, {"steps_done", static_cast<int64_t>(p.step_ms.size())}});
    Lists({{"losses", p.losses, Format::kSignificant9}, {"step_ms", p.step_ms, Format::kFixed6}});
    w_.EndObject();
  }

 private:
  void Rank(const RankMetrics& r, bool replicas) {
    w_.StartObject();
    WriteMembers(w_, {{"rank", r.rank}});
    Members({{"busy_ms", r.busy_ms, Format::kFixed6}, {"span_ms", r.span_ms, Format::kFixed6},
             {"compute_ms", r.compute_ms, Format::kFixed6}, {"wait_ms", r.wait_ms, Format::kFixed6},
             {"transfer_ms", r.transfer_ms, Format::kFixed6}});
    if (replicas) Members({{"collective_ms", r.collective_ms, Format::kFixed6}});
    if (r.peak_host_memory_bytes >= 0) Members({{"offload_wait_ms", r.offload_wait_ms, Format::kFixed6}});
    Members({{"overhead_ms", r.overhead_ms, Format::kFixed6}, {"idle_ms", r.idle_ms, Format::kFixed6}});
    WriteMembers(w_, {{"peak_memory_bytes", r.peak_memory_bytes},
                      {"peak_inflight_microbatches", r.peak_inflight_microbatches},
                      {"peak_weight_versions", r.peak_weight_versions}});
    if (r.peak_host_memory_bytes >= 0) WriteMembers(w_, {{"peak_host_memory_bytes", r.peak_host_memory_bytes}});
    if (r.device_peak_memory_bytes >= 0) WriteMembers(w_, {{"device_peak_memory_bytes", r.device_peak_memory_bytes}});
    if (r.device >= 0) WriteMembers(w_, {{"device", r.device}});
    Key(w_, "oom");
    w_.Bool(r.oom);
    w_.EndObject();
  }

  void Members(std::initializer_list<NumberMember> members) {
    for (const NumberMember& m : members) {
      Key(w_, m.key);
      Number(m.value, m.format);
    }
  }

  void Lists(std::initializer_list<ListMember> members) {
    for (const ListMember& m : members) {
      Key(w_, m.key);
      w_.StartArray();
      for (const double v : m.values) Number(v, m.format);
      w_.EndArray();
    }
  }

  void Number(double value, Format format) {
    SC_CHECK(std::isfinite(value), fmt::format("metrics hold a non-finite number ({})", value));
    char text[64];
    const size_t n = FormatNumber(value, format, text);
    SC_CHECK(n < sizeof text, "a metrics number fits 64 characters");
    if (form_ == NumberForm::kFixed) {
      WriteNumberText(w_, std::string_view(text, n));
    } else {
      WriteNumberText(w_, Reparsed(std::string_view(text, n)));
    }
  }

  // The number `text` holds, in shortest form; an integer's digits as they are ("-0" is 0).
  static std::string Reparsed(std::string_view text) {
    if (text.find_first_of(".eE") == std::string_view::npos) return text == "-0" ? "0" : std::string(text);
    double value = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    SC_CHECK(ec == std::errc() && end == text.data() + text.size(), fmt::format("a metrics number reads back ({})", text));
    return ShortestNumberText(value);
  }

  JsonWriter& w_;
  NumberForm form_;
};

}  // namespace

void WriteScheduleMetrics(JsonWriter& writer, const ScheduleMetrics& metrics, NumberForm form) {
  MetricsWriter(&writer, form).Schedule(metrics);
}

std::string ScheduleMetricsToJson(const ScheduleMetrics& metrics) {
  JsonTextStream out(1024);
  JsonWriter w(out);
  MetricsWriter(&w, NumberForm::kFixed).Schedule(metrics);
  SC_CHECK(w.IsComplete(), "a schedule's metrics object is complete");
  return out.Take();
}

std::string MetricsFileToJson(const MetricsFile& file) {
  JsonTextStream out(512 + 1024 * file.schedules.size());
  JsonWriter w(out);
  w.StartObject();
  WriteMembers(w, {{"scenario", file.scenario}, {"source", file.source}});
  if (file.costs) WriteMembers(w, {{"costs", *file.costs}});
  if (file.backend) WriteMembers(w, {{"backend", *file.backend}});
  if (file.precision) WriteMembers(w, {{"precision", *file.precision}});
  if (file.scenario_file) {
    WriteMembers(w, {{"scenario_file", *file.scenario_file}});
    Key(w, "overrides");
    w.StartArray();
    for (const std::string& o : file.overrides) WriteString(w, o);
    w.EndArray();
  }
  Key(w, "schedules");
  w.StartArray();
  MetricsWriter schedules(&w, NumberForm::kFixed);
  for (const ScheduleMetrics& m : file.schedules) schedules.Schedule(m);
  w.EndArray();
  if (file.partial) {
    Key(w, "partial");
    schedules.Partial(*file.partial);
  }
  if (file.workload) {
    Key(w, "workload");
    schedules.Workload(*file.workload);
  }
  w.EndObject();
  SC_CHECK(w.IsComplete(), "metrics JSON is complete");
  std::string text = out.Take();
  text += '\n';
  return text;
}

}  // namespace stagecraft::schedules
