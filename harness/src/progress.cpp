// Progress of a run (see progress.h).
#include "stagecraft/harness/progress.h"

#include <cmath>
#include <utility>

#include "stagecraft/base/output_file.h"
#include "stagecraft/schedules/metrics_json.h"

namespace stagecraft::harness {

using schedules::MetricsFile;
using schedules::PartialRun;

bool DueOncePerSecond(const exec::StepProgress& p, int64_t last_ns) {
  return p.step + 1 == p.steps || last_ns < 0 || p.end_ns - last_ns > 1'000'000'000;
}

bool DueForReport(const exec::StepProgress& p, int64_t last_ns) {
  return p.steps <= 50 || DueOncePerSecond(p, last_ns);
}

ProgressFile::ProgressFile(std::string path, MetricsFile base, int schedules_total)
    : path_(std::move(path)), file_(std::move(base)) {
  file_.partial = PartialRun{};
  file_.partial->schedules_total = schedules_total;
}

void ProgressFile::SetDone(const std::string& done_json) {
  MetricsFile done = schedules::MetricsFileFromJson(done_json, "the progress broadcast");
  file_.schedules = std::move(done.schedules);
  PartialRun& p = *file_.partial;
  p.schedules_done = static_cast<int>(file_.schedules.size());
  p.schedule.clear();
  p.steps = 0;
  p.losses.clear();
  p.step_ms.clear();
}

void ProgressFile::Start(const std::string& schedule, int steps) {
  file_.partial->schedule = schedule;
  file_.partial->steps = steps;
  last_write_ns_ = -1;
}

void ProgressFile::Step(const exec::StepProgress& progress, int64_t step_ns) {
  PartialRun& p = *file_.partial;
  p.losses.push_back(progress.loss);
  p.step_ms.push_back(static_cast<double>(step_ns) * 1e-6);
  // A diverged step ends the run; its file keeps the last good one.
  if (!DueOncePerSecond(progress, last_write_ns_) || !std::isfinite(progress.loss)) return;
  last_write_ns_ = progress.end_ns;
  Write();
}

void ProgressFile::Write() const { WriteTextFileAtomically(path_, schedules::MetricsFileToJson(file_)); }

}  // namespace stagecraft::harness
