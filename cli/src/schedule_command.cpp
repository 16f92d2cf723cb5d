// `stagecraft schedule`: generate (or import) a schedule, validate it and print it as a
// unit-time grid, a PyTorch CSV or the IR as JSON.
#include <cstdio>
#include <string>

#include <fmt/format.h>

#include "commands.h"
#include "scenario_runs.h"
#include "stagecraft/base/check.h"
#include "stagecraft/base/error.h"
#include "stagecraft/schedules/analysis.h"
#include "stagecraft/schedules/csv_io.h"
#include "stagecraft/schedules/generators.h"
#include "stagecraft/schedules/json_io.h"
#include "stagecraft/schedules/lower.h"
#include "stagecraft/schedules/validate.h"

namespace stagecraft::cli {
namespace {

using namespace stagecraft::schedules;

struct ScheduleFlags {
  std::string schedule;
  std::string import_path;
  int ranks = 0;
  int microbatches = 0;
  int chunks = 1;
  bool chunks_given = false;
  int steps = 1;
  std::string format = "grid";
  bool comms = false;
  bool vertical_sync = false;
  bool recompute = false;
  std::string weights = "flush";
  std::string p2p = "ahead";
};

Schedule Build(const ScheduleFlags& f) {
  if (!f.import_path.empty()) {
    CsvImportOptions options;
    options.name = f.import_path;
    options.chunks = f.chunks_given ? f.chunks : 0;  // infer stages per rank and the placement
    options.microbatches = f.microbatches;
    options.steps = f.steps;
    if (!ParsePolicy(f.weights, &options.weights)) {
      throw InputError(fmt::format("--weights: expected flush, stash or 2bw, got '{}'", f.weights));
    }
    return ImportCsv(ReadTextFile(f.import_path), f.import_path, options);
  }
  if (f.schedule.empty()) throw InputError("--schedule or --import is required");
  if (f.ranks < 1) throw InputError(fmt::format("--ranks must be >= 1 (got {})", f.ranks));
  if (f.microbatches < 1) throw InputError(fmt::format("--microbatches must be >= 1 (got {})", f.microbatches));
  GeneratorParams params;
  params.ranks = f.ranks;
  params.microbatches = f.microbatches;
  params.chunks = f.chunks;
  params.steps = f.steps;
  params.vertical_sync = f.vertical_sync;
  params.recompute = f.recompute;
  return Generate(f.schedule, params);
}

int Run(const ScheduleFlags& f) {
  Schedule s = Build(f);
  const bool lower = f.format == "json" || (f.format == "csv" && f.comms) || s.lowered;
  P2p p2p = P2p::kAhead;
  SC_CHECK(ParseP2p(f.p2p, &p2p), "CLI11 checks --p2p");
  if (lower) s = Lower(s, p2p);
  const auto diags = Validate(s);
  if (!diags.empty()) {
    for (const auto& d : diags) std::fprintf(stderr, "%s: %s: %s\n", s.name.c_str(), std::string(DiagCodeName(d.code)).c_str(), d.message.c_str());
    throw InputError(fmt::format("{}: {} problem(s) found (listed above)", s.name, diags.size()));
  }
  std::string out;
  if (f.format == "grid") out = RenderGrid(s);
  else if (f.format == "csv") out = ExportCsv(s, f.comms ? CsvForm::kComputeComms : CsvForm::kComputeOnly);
  else out = ToJson(s) + "\n";
  std::fwrite(out.data(), 1, out.size(), stdout);
  return 0;
}

}  // namespace

Command AddScheduleCommand(CLI::App& root) {
  auto flags = std::make_shared<ScheduleFlags>();
  CLI::App* app = root.add_subcommand("schedule", "Generate or import a schedule, validate it and print it");
  app->add_option("--schedule", flags->schedule, "Schedule: " + GeneratorNames());
  app->add_option("--import", flags->import_path, "Import a torch.distributed.pipelining CSV instead");
  app->add_option("--ranks", flags->ranks, "Pipeline ranks (devices)");
  app->add_option("--microbatches", flags->microbatches, "Microbatches per step (for --import: 0 = all one step)");
  CLI::Option* chunks =
      app->add_option("--chunks", flags->chunks,
                      "Virtual stages per rank (interleaved); --import infers it and the placement when not given")
          ->capture_default_str();
  app->add_option("--steps", flags->steps, "Optimizer steps covered by the schedule")->capture_default_str();
  app->add_option("--format", flags->format, "Output: grid, csv or json")
      ->check(CLI::IsMember({"grid", "csv", "json"}))
      ->capture_default_str();
  app->add_flag("--comms", flags->comms, "csv: compute_comms form (with SEND/RECV)");
  app->add_flag("--vertical-sync", flags->vertical_sync, "pipedream: every stage uses stage 0's version");
  app->add_flag("--recompute", flags->recompute, "Recompute activations in the backward");
  app->add_option("--weights", flags->weights, "--import: weight policy flush, stash or 2bw")->capture_default_str();
  app->add_option("--p2p", flags->p2p, "How lowering posts receives: ahead or lockstep (torch.distributed.pipelining)")
      ->check(CLI::IsMember({"ahead", "lockstep"}))
      ->capture_default_str();
  return {app, [flags, chunks] {
            flags->chunks_given = chunks->count() > 0;
            return Run(*flags);
          }};
}

}  // namespace stagecraft::cli
