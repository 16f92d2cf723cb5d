// Small text helpers the panels share: signed time differences, byte sizes, op names.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

#include "stagecraft/schedules/trace.h"
#include "stagecraft/viz/timeline.h"

namespace stagecraft::viz::app {

// "+1.2 ms" / "-350 us" / "0 ns".
inline std::string SignedTime(int64_t ns) {
  if (ns == 0) return FormatTime(0);
  return (ns < 0 ? "-" : "+") + FormatTime(ns < 0 ? -ns : ns);
}

inline std::string Mebibytes(int64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f MiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
  return text;
}

// The action string of an op, as in the trace's event names: "F3", "SEND_B2", "STEP",
// "REDUCE_GRAD" (a STEP's and a REDUCE_GRAD's microbatch means nothing).
inline std::string ActionName(const schedules::TraceOp& op) {
  const std::string kind(schedules::KindName(op.op.kind));
  if (schedules::Info(op.op.kind).number == schedules::ActionNumber::kVersion) return kind;
  return kind + std::to_string(op.op.microbatch);
}

}  // namespace stagecraft::viz::app
