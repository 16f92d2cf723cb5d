// The files compare reads (compare.h, compare_files.h): metrics files and measured traces.
#include <filesystem>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "compare_files.h"
#include "stagecraft/base/error.h"
#include "stagecraft/base/input_file.h"
#include "stagecraft/base/printable.h"
#include "stagecraft/harness/replay.h"
#include "stagecraft/harness/trace_path.h"
#include "stagecraft/schedules/metrics_json.h"

namespace stagecraft::harness {

void CheckStepTimes(const RunFile& file) {
  for (size_t i = 0; i < file.schedules.size(); ++i) {
    if (!(file.schedules[i].step_time_ms > 0)) {
      throw InputError(fmt::format("{}: schedules[{}].step_time_ms: must be > 0 as the measured run (errors are "
                                   "relative to its step time)",
                                   file.path, i));
    }
  }
}

RunFile RunFileFromJson(std::string_view text, const std::string& path) {
  return RunFile{schedules::MetricsFileFromJson(text, path), path};
}

RunFile ReadRunFile(const std::string& path) {
  return RunFileFromJson(ReadInputFile(path, kMaxJsonBytes, "a metrics file"), path);
}

namespace detail {

using schedules::ScheduleMetrics;

std::vector<TraceFile> MeasuredTraces(const std::string& path, const RunFile& predicted, const RunFile& measured) {
  std::error_code ec;
  if (std::filesystem::exists(std::filesystem::status(path, ec))) {
    TraceFile file{path, ReadTraceInFull(path)};
    const std::string& name = file.trace.schedule;
    const RunFile& lacking = measured.Find(name) == nullptr ? measured : predicted;
    if (lacking.Find(name) == nullptr) {
      throw InputError(fmt::format("{}: the trace is of schedule '{}', which {} does not hold: its error cannot be "
                                   "split",
                                   path, Printable(name), lacking.path));
    }
    return {std::move(file)};
  }
  // As execute named them: one file per schedule when the run had several (a partial run's
  // running schedule included).
  const bool several = measured.schedules.size() > 1 || (measured.partial && measured.partial->schedules_total > 1);
  if (!several) return {{path, ReadTraceInFull(path)}};  // no such file: ReadInputFile says so
  std::vector<TraceFile> traces;
  for (const ScheduleMetrics& p : predicted.schedules) {
    if (measured.Find(p.schedule) == nullptr) continue;
    const std::string beside = TracePath(path, p.schedule, true);
    if (!std::filesystem::exists(std::filesystem::status(beside, ec))) {
      throw InputError(fmt::format("{}: no such file, nor {}'s trace beside it ({}), as execute --trace writes one "
                                   "per schedule",
                                   path, Printable(p.schedule), beside));
    }
    traces.push_back({beside, ReadTraceInFull(beside)});
    if (traces.back().trace.schedule != p.schedule) {
      throw InputError(fmt::format("{}: the trace is of schedule '{}', not {}, whose trace execute --trace "
                                   "writes there",
                                   beside, Printable(traces.back().trace.schedule), Printable(p.schedule)));
    }
  }
  return traces;
}

}  // namespace detail
}  // namespace stagecraft::harness
