// The table of schedule generators. Each generator lives in its own file under
// schedules/src/generators/, cites its paper, and emits compute ops only; weights.h then
// assigns weight versions and STEPs, and lower.h inserts SEND/RECV.
#pragma once

#include <atomic>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "stagecraft/base/error.h"
#include "stagecraft/schedules/ir.h"

namespace stagecraft::schedules {

struct GeneratorInfo {
  std::string_view name;      // "gpipe", "1f1b", ...
  std::string_view citation;  // paper the order follows
  WeightPolicy weights;
  bool interleaved;  // takes chunks > 1 (and requires it)
  // Returns an empty string when (ranks, microbatches, chunks) is allowed, else why not.
  std::function<std::string(const GeneratorParams&)> check;
  // Emits per-rank compute ops (F/B/I/W with stage, microbatch, step); versions unset.
  std::function<std::vector<std::vector<Op>>(const GeneratorParams&)> emit;
  Placement placement = Placement::kLoop;  // where its stages sit (ir.h)
  // Schedules by the stages' costs (GeneratorParams::costs, which the harness fills from the
  // scenario); not part of "all", which runs the schedules that are the same whatever the costs.
  bool uses_costs = false;
  // Part of "all" (and of plan's and the search's default sets). False for a schedule of another
  // kind of job, which runs only when named: spilled (one device, its shards in turn), and
  // interleaved-overlap (interleaved's order for a mixture-of-experts job's all-to-alls).
  bool in_all = true;
  // Part of plan's default set for a mixture-of-experts model, at its layouts with expert
  // parallelism (E > 1: its overlapped pairs matter only beside all-to-alls): interleaved-overlap.
  bool for_expert_parallel = false;
};

// The virtual stages per rank `info` runs with: `stated` when the user stated it (> 0), else the
// schedule's own: 2 for the schedules that interleave (Megatron's smallest, ZB-V's and
// DualPipe-V's V), 1 for the others. A stated value is never changed: CheckParams refuses one
// the schedule cannot run with.
int ChunksFor(const GeneratorInfo& info, int stated);

const std::vector<GeneratorInfo>& Generators();
const GeneratorInfo* FindGenerator(std::string_view name);  // nullptr when unknown
std::string GeneratorNames();                               // "gpipe, 1f1b, ..."

// Empty when `info` takes `params` (the shared limits plus the generator's own rule), else
// why not, prefixed with the generator's name.
std::string CheckParams(const GeneratorInfo& info, const GeneratorParams& params);

// Generates a complete, unlowered schedule: emit + AssignWeights. Throws InputError naming
// the generator and the rule when the parameters are not allowed. `stop`, when set by another
// thread, ends it between its two halves: it throws StopRequested (base/stop.h).
Schedule Generate(std::string_view name, const GeneratorParams& params, const std::atomic<bool>* stop = nullptr);

// Per-generator emitters (one file each).
std::vector<std::vector<Op>> EmitGpipe(const GeneratorParams& p);
std::vector<std::vector<Op>> EmitOneFOneB(const GeneratorParams& p);
std::vector<std::vector<Op>> EmitPipeDream(const GeneratorParams& p);
std::vector<std::vector<Op>> EmitTwoBW(const GeneratorParams& p);
std::vector<std::vector<Op>> EmitPipeMare(const GeneratorParams& p);
std::string CheckTwoBW(const GeneratorParams& p);
std::vector<std::vector<Op>> EmitInterleaved(const GeneratorParams& p);
std::vector<std::vector<Op>> EmitInterleavedOverlap(const GeneratorParams& p);
std::string CheckInterleaved(const GeneratorParams& p);
std::vector<std::vector<Op>> EmitZbH1(const GeneratorParams& p);
std::vector<std::vector<Op>> EmitZbH2(const GeneratorParams& p);
std::vector<std::vector<Op>> EmitZbV(const GeneratorParams& p);
std::string CheckZbV(const GeneratorParams& p);
std::vector<std::vector<Op>> EmitDualPipeV(const GeneratorParams& p);
std::string CheckDualPipeV(const GeneratorParams& p);
std::vector<std::vector<Op>> EmitZb1p(const GeneratorParams& p);
std::vector<std::vector<Op>> EmitZb2p(const GeneratorParams& p);
std::vector<std::vector<Op>> EmitZbAuto(const GeneratorParams& p);
std::string CheckZbAuto(const GeneratorParams& p);
std::vector<std::vector<Op>> EmitSpilled(const GeneratorParams& p);
std::string CheckSpilled(const GeneratorParams& p);

// 1F1B order over `total` microbatches with no flush, numbered globally; shared by 1f1b
// (per step), pipedream and 2bw (across steps). `m` splits the global index into step/mb.
std::vector<std::vector<Op>> OneFOneBOrder(int ranks, int total, int m, int step_offset);

}  // namespace stagecraft::schedules
