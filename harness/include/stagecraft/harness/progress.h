// What a run reports while it lasts: when a step's line is due, and `execute --json OUT`'s
// progress file OUT.partial, so that a failed or killed run loses nothing it measured.
#pragma once

#include <cstdint>
#include <string>

#include "stagecraft/exec/runtime.h"
#include "stagecraft/schedules/metrics.h"

namespace stagecraft::harness {

// The first and last steps of a run always, and otherwise about once a second since `last_ns`
// (< 0: never): when the progress file is rewritten.
bool DueOncePerSecond(const exec::StepProgress& p, int64_t last_ns);
// Whether a step's line is printed: every step of a short run, else as DueOncePerSecond.
bool DueForReport(const exec::StepProgress& p, int64_t last_ns);

// `execute --json OUT` keeps OUT.partial while it runs: the complete schedules so far (every
// rank holds them, broadcast from rank 0 after each) and the running schedule's finished steps,
// written by the rank that sees them finish (the last stage's) after a schedule's first step,
// then about once a second, and after its last. Every write replaces the file whole (a few
// hundred microseconds inside the timed run, on the rank of the last stage: once a step, that
// was a percent of a 20-step run's time). A complete run removes it once OUT is written; a
// killed or failed one leaves it, marked partial. An empty path disables it.
class ProgressFile {
 public:
  ProgressFile(std::string path, schedules::MetricsFile base, int schedules_total);
  bool enabled() const { return !path_.empty(); }
  const std::string& path() const { return path_; }

  // Every rank, once a schedule is complete: the complete ones (metrics JSON).
  void SetDone(const std::string& done_json);
  void Start(const std::string& schedule, int steps);
  // The last stage's rank, as each step ends (`step_ns` long).
  void Step(const exec::StepProgress& progress, int64_t step_ns);
  void Write() const;

 private:
  std::string path_;
  schedules::MetricsFile file_;
  int64_t last_write_ns_ = -1;
};

}  // namespace stagecraft::harness
