// What traces share with the metrics codec (metrics_json.h): a trace's header embeds one
// schedule's metrics object as its summary, written by the same code and read leniently.
#pragma once

#include <optional>

#include <nlohmann/json_fwd.hpp>

#include "json_writer.h"
#include "stagecraft/schedules/metrics.h"

namespace stagecraft::schedules {

// How numbers are written. kFixed: with the format's fixed decimals ("33.000000"), as metrics
// files have them. kReparsed: that text read back as a number and written in shortest
// round-trip form by nlohmann::json ("33.0"), as trace summaries have always had them.
enum class NumberForm { kFixed, kReparsed };

void WriteScheduleMetrics(JsonWriter& writer, const ScheduleMetrics& metrics, NumberForm form);

// The lenient read of ScheduleMetricsFromJsonLenient, from a parsed value.
std::optional<ScheduleMetrics> ScheduleMetricsFromValueLenient(const nlohmann::json& value);

}  // namespace stagecraft::schedules
