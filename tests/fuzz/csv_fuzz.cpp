// Fuzz harness: a torch.distributed.pipelining CSV schedule through the path an imported file
// takes (`stagecraft schedule --import`, a scenario's schedule file): ImportCsv, Validate as
// read, Lower, Validate again, and for a valid schedule the grid, CSV and JSON outputs. Lines
// that start with '#' are harness options, not CSV: "# chunks=0 placement=v microbatches=4
// steps=2 repeat=1 weights=stash p2p=lockstep" (defaults: --import's, chunks 0 = inferred).
// A valid schedule must survive export and re-import unchanged. Inputs whose options alone ask
// for a huge schedule (one step repeated more than kMaxRepeatedSteps times) are skipped: the
// importer builds what it is asked for, up to the generators' limit, and that is no bug.
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "fuzz_input.h"
#include "stagecraft/base/error.h"
#include "stagecraft/schedules/analysis.h"
#include "stagecraft/schedules/csv_io.h"
#include "stagecraft/schedules/json_io.h"
#include "stagecraft/schedules/lower.h"
#include "stagecraft/schedules/validate.h"

using namespace stagecraft::schedules;

namespace {

constexpr int kMaxRepeatedSteps = 4096;

// --import's defaults: stages per rank and placement inferred, one step, flush, receives ahead.
struct Options {
  CsvImportOptions import{.chunks = 0};
  P2p p2p = P2p::kAhead;
};

void ReadInt(std::string_view text, int* out) {
  int value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec == std::errc() && end == text.data() + text.size()) *out = value;
}

// Applies the "key=value" words of one option line; anything else is ignored.
void ReadOptions(std::string_view line, Options* o) {
  for (size_t start = 0; start < line.size();) {
    size_t end = line.find(' ', start);
    if (end == std::string_view::npos) end = line.size();
    const std::string_view word = line.substr(start, end - start);
    start = end + 1;
    const size_t eq = word.find('=');
    if (eq == std::string_view::npos) continue;
    const std::string_view key = word.substr(0, eq), value = word.substr(eq + 1);
    if (key == "chunks") ReadInt(value, &o->import.chunks);
    if (key == "microbatches") ReadInt(value, &o->import.microbatches);
    if (key == "steps") ReadInt(value, &o->import.steps);
    if (key == "repeat") o->import.repeat_one_step = value == "1";
    if (key == "placement") o->import.placement = value == "v" ? Placement::kV : Placement::kLoop;
    if (key == "weights") ParsePolicy(value, &o->import.weights);
    if (key == "p2p") ParseP2p(value, &o->p2p);
  }
}

[[noreturn]] void Broken(const char* what) {
  std::fprintf(stderr, "csv_fuzz: %s\n", what);
  std::abort();
}

// Export, then import with the shape the first import found: the same schedule.
void CheckRoundTrip(const Schedule& s) {
  CsvImportOptions again;
  again.name = s.name;
  again.chunks = s.shape.chunks;
  again.placement = s.shape.placement;
  again.microbatches = s.microbatches;
  again.steps = s.steps;
  again.weights = s.weights;
  const std::string text = ExportCsv(s, s.lowered ? CsvForm::kComputeComms : CsvForm::kComputeOnly);
  if (!(ImportCsv(text, "exported.csv", again) == s)) Broken("a valid schedule changed through export and import");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text = stagecraft::fuzz::AsText(data, size);
  Options options;
  std::string csv;
  for (size_t start = 0; start < text.size();) {
    size_t end = text.find('\n', start);
    end = end == std::string_view::npos ? text.size() : end + 1;
    const std::string_view line = text.substr(start, end - start);
    if (line.starts_with('#')) ReadOptions(line.substr(1, line.find_first_of("\r\n") - 1), &options);
    else csv += line;
    start = end;
  }
  if (options.import.repeat_one_step && options.import.steps > kMaxRepeatedSteps) return 0;
  try {
    const Schedule imported = ImportCsv(csv, "fuzz.csv", options.import);
    const bool valid_as_read = Validate(imported).empty();
    const Schedule lowered = Lower(imported, options.p2p);
    if (!Validate(lowered).empty()) return 0;
    if (valid_as_read) RenderGrid(imported);
    ExportCsv(lowered, CsvForm::kComputeOnly);
    ExportCsv(lowered, CsvForm::kComputeComms);
    ToJson(lowered);
    if (valid_as_read) CheckRoundTrip(imported);
  } catch (const stagecraft::InputError&) {
    // Bad input, reported as it should be; anything else escapes to the fuzzer.
  }
  return 0;
}
