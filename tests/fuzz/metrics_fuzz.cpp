// Fuzz harness: a metrics file (`simulate --json`, `execute --json`) as `stagecraft compare`
// reads it (the strict MetricsFileFromJson), and as a schedule object the viewer reads from a
// trace's summary (the lenient ScheduleMetricsFromJsonLenient, which never throws).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "fuzz_input.h"
#include "stagecraft/base/error.h"
#include "stagecraft/schedules/metrics_json.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace stagecraft::schedules;
  const std::string_view text = stagecraft::fuzz::AsText(data, size);
  ScheduleMetricsFromJsonLenient(text);
  try {
    const MetricsFile file = MetricsFileFromJson(text, "fuzz-metrics.json");
    for (const ScheduleMetrics& s : file.schedules) {
      // compare relies on these: one per_rank entry per rank, schedule names unique.
      if (s.ranks_detail.size() != static_cast<size_t>(s.ranks) || file.Find(s.schedule) != &s) {
        std::fprintf(stderr, "metrics_fuzz: the strict read let a malformed schedule through\n");
        std::abort();
      }
    }
  } catch (const stagecraft::InputError&) {
    // Bad input, reported as it should be; anything else escapes to the fuzzer.
  }
  return 0;
}
