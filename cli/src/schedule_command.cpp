// `stagecraft schedule`: generate (or import) a schedule, validate it and print it as a
// unit-time grid, a PyTorch CSV or the IR as JSON. An imported file that carries its transfers
// (SEND/RECV) is validated and printed with them, as simulate and execute run it. Its --help
// lists each generator with the paper it follows.
#include <cstdio>
#include <string>

#include <fmt/format.h>

#include "commands.h"
#include "stagecraft/schedules/staleness.h"
#include "command_support.h"
#include "stagecraft/base/check.h"
#include "stagecraft/base/error.h"
#include "stagecraft/base/input_file.h"
#include "stagecraft/base/printable.h"
#include "stagecraft/schedules/analysis.h"
#include "stagecraft/schedules/budget.h"
#include "stagecraft/schedules/csv_io.h"
#include "stagecraft/schedules/generators.h"
#include "stagecraft/schedules/json_io.h"
#include "stagecraft/schedules/lower.h"
#include "stagecraft/schedules/validate.h"
#include "stagecraft/scenario/limits.h"

namespace stagecraft::cli {
namespace {

using namespace stagecraft::schedules;

struct ScheduleFlags {
  std::string schedule;
  std::string import_path;
  int ranks = 0;
  int microbatches = 0;
  int chunks = 0;  // 0: not given (the generator's own, schedules::ChunksFor; --import infers it)
  int steps = 1;
  int data_parallel = 1;
  std::string format = "grid";
  bool comms = false;
  bool vertical_sync = false;
  bool recompute = false;
  std::string weights = "flush";
  std::string p2p = "ahead";
  bool p2p_given = false;
  bool relower = false;  // --import: drop the file's transfers and lower again
  int64_t max_ops = 0;
  bool explain = false;  // grid: each stage's weight delay after it
};

// --explain: how many updates each stage's weights are behind synchronous SGD's (staleness.h).
std::string DelayLines(const Schedule& s) {
  std::string out = "weight delay per stage (updates behind synchronous SGD for the same microbatch; most over the "
                    "run): forward / backward\n";
  for (const StageDelay& d : WeightDelays(s)) {
    out += fmt::format("  stage {:>3}: {} / {}{}\n", d.stage, d.forward, d.backward,
                       d.differ ? " (the backward reads another version than its forward)" : "");
  }
  return out;
}

Schedule Build(const ScheduleFlags& f) {
  if (!f.import_path.empty()) {
    CsvImportOptions options;
    options.name = f.import_path;
    options.chunks = f.chunks;  // 0: infer stages per rank and the placement
    options.microbatches = f.microbatches;
    options.steps = f.steps;
    if (!ParsePolicy(f.weights, &options.weights)) {
      throw InputError(fmt::format("--weights: expected {}, got '{}'", PolicyChoices(), f.weights));
    }
    Schedule s = ImportCsv(ReadInputFile(f.import_path, kMaxCsvBytes, "a schedule CSV"), f.import_path, options);
    s.data_parallel = f.data_parallel;
    return s;
  }
  if (f.schedule.empty()) throw InputError("--schedule or --import is required");
  const GeneratorInfo* info = FindGenerator(f.schedule);
  if (f.ranks < 1) throw InputError(fmt::format("--ranks must be >= 1 (got {})", f.ranks));
  if (f.microbatches < 1) throw InputError(fmt::format("--microbatches must be >= 1 (got {})", f.microbatches));
  GeneratorParams params;
  params.ranks = f.ranks;
  params.microbatches = f.microbatches;
  params.chunks = info != nullptr ? ChunksFor(*info, f.chunks) : f.chunks;
  params.steps = f.steps;
  params.vertical_sync = f.vertical_sync;
  params.recompute = f.recompute;
  params.data_parallel = f.data_parallel;
  // Before anything is built: a shape too large to hold is refused by its estimate.
  if (info != nullptr) CheckSize(DescribeShape(info->name, params), EstimateSize(*info, params), f.max_ops);
  return Generate(f.schedule, params);
}

// The schedule with the transfers it is printed with. A file's own SEND/RECV are kept as they
// are (unless --relower); otherwise the schedule is lowered when the output shows transfers.
Schedule WithTransfers(Schedule s, const ScheduleFlags& f) {
  if (s.lowered && !f.relower) {
    if (f.p2p_given) {
      throw InputError(fmt::format("{}: --p2p applies only to lowering, and the file carries its own transfers "
                                   "(SEND/RECV); add --relower to drop them and lower again",
                                   Printable(f.import_path)));
    }
    return PlaceReduceGrads(s);
  }
  const bool shows_transfers = f.format == "json" || (f.format == "csv" && f.comms) || f.data_parallel > 1;
  if (!shows_transfers && !s.lowered) return s;
  P2p p2p = P2p::kAhead;
  SC_CHECK(ParseP2p(f.p2p, &p2p), "CLI11 checks --p2p");
  return Lower(s, p2p);
}

int Run(const ScheduleFlags& f) {
  if (f.explain && f.format != "grid") {
    throw InputError(fmt::format("--explain: prints with the grid (--format grid), not {}", f.format));
  }
  Schedule s = Build(f);
  // Before lowering and validating, which a shape far past the grid's limits makes slow.
  if (f.format == "grid") {
    if (std::string why = GridSizeProblem(s); !why.empty()) throw InputError(why);
  }
  s = WithTransfers(std::move(s), f);
  if (const auto diags = Validate(s); !diags.empty()) {
    throw InputError(fmt::format("{}: {}", Printable(s.name), SummarizeDiagnostics(diags)));
  }
  std::string out;
  if (f.format == "grid") out = RenderGrid(s) + (f.explain ? DelayLines(s) : "");
  else if (f.format == "csv") out = ExportCsv(s, f.comms ? CsvForm::kComputeComms : CsvForm::kComputeOnly);
  else out = ToJson(s) + "\n";
  std::fwrite(out.data(), 1, out.size(), stdout);
  return 0;
}

// The generators and the paper each one's order follows, for `schedule --help`.
std::string GeneratorList() {
  std::string out = "Schedules and the papers they follow:\n";
  for (const GeneratorInfo& info : Generators()) out += fmt::format("  {:<12} {}\n", info.name, info.citation);
  return out;
}

}  // namespace

Command AddScheduleCommand(CLI::App& root) {
  auto flags = std::make_shared<ScheduleFlags>();
  CLI::App* app = root.add_subcommand("schedule", "Generate or import a schedule, validate it and print it");
  CLI::Option* schedule = app->add_option("--schedule", flags->schedule, "Schedule: " + GeneratorNames());
  CLI::Option* import = app->add_option("--import", flags->import_path, "Import a torch.distributed.pipelining CSV instead")
                            ->excludes(schedule);
  app->add_option("--ranks", flags->ranks, "Pipeline ranks (devices)");
  app->add_option("--microbatches", flags->microbatches, "Microbatches per step (for --import: 0 = all one step)");
  app->add_option("--chunks", flags->chunks,
                      "Virtual stages per rank (default: the schedule's own, 2 for interleaved, zb-v and dualpipe-v, "
                      "else 1); --import infers it and the placement when not given")
      ->check(CLI::Range(1, sim::kMaxChunks));
  app->add_option("--steps", flags->steps, "Optimizer steps covered by the schedule")->capture_default_str();
  app->add_option("--format", flags->format, "Output: grid, csv or json")
      ->check(CLI::IsMember({"grid", "csv", "json"}))
      ->capture_default_str();
  app->add_option("--data-parallel", flags->data_parallel,
                  "Replicas of the pipeline: lowering adds a REDUCE_GRAD (gradient all-reduce) before every STEP")
      ->check(CLI::Range(1, sim::kMaxDevices))
      ->capture_default_str();
  app->add_flag("--comms", flags->comms, "csv: compute_comms form (with SEND/RECV)");
  app->add_flag("--vertical-sync", flags->vertical_sync, "pipedream: every stage uses stage 0's version");
  app->add_flag("--recompute", flags->recompute, "Recompute activations in the backward");
  app->add_flag("--explain", flags->explain,
                "grid: each stage's weight delay (updates behind synchronous SGD), forward and backward");
  app->add_option("--weights", flags->weights, "--import: weight policy " + PolicyChoices())->capture_default_str();
  CLI::Option* p2p =
      app->add_option("--p2p", flags->p2p,
                      "How lowering posts receives: ahead or lockstep (torch.distributed.pipelining)")
          ->check(CLI::IsMember({"ahead", "lockstep"}))
          ->capture_default_str();
  app->add_flag("--relower", flags->relower,
                "--import: drop the file's SEND/RECV and lower its compute order again (default: keep and validate "
                "them as they are)")
      ->needs(import);
  AddMaxOpsOption(app, &flags->max_ops);
  app->footer(GeneratorList());
  return {app, [flags, p2p] {
            flags->p2p_given = p2p->count() > 0;
            return Run(*flags);
          }};
}

}  // namespace stagecraft::cli
