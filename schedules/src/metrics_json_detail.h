// What traces share with the metrics codec (metrics_json.h): a trace's header embeds one
// schedule's metrics object as its summary, written by the same code and read leniently.
#pragma once

#include <optional>

#include "json_reader.h"
#include "json_writer.h"
#include "stagecraft/schedules/metrics.h"

namespace stagecraft::schedules {

// How numbers are written. kFixed: with the format's fixed decimals ("33.000000"), as metrics
// files have them. kReparsed: that text read back as a number and written in shortest
// round-trip form (ShortestNumberText: "33.0", "1.3e-05"), as trace summaries have them; an
// integer's text ("2", a loss in {:.9g}) stays as it is.
enum class NumberForm { kFixed, kReparsed };

void WriteScheduleMetrics(JsonWriter& writer, const ScheduleMetrics& metrics, NumberForm form);

// The lenient read of ScheduleMetricsFromJsonLenient, from a parsed value.
std::optional<ScheduleMetrics> ScheduleMetricsFromValueLenient(const JsonValue& value);

}  // namespace stagecraft::schedules
