// The size of a schedule before it is built: an upper bound on the ops its IR will hold after
// Lower(), the memory that generating, lowering, validating and simulating it takes, and the
// check a command makes against its --max-ops limit before building anything.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "stagecraft/schedules/generators.h"
#include "stagecraft/schedules/ir.h"

namespace stagecraft::schedules {

// Memory per op of a run, from generating through simulating (the schedule, its lowered copy,
// the validation graph, the run record and the engine's state): the slope of `stagecraft
// simulate`'s peak resident memory (/usr/bin/time -f %M) over the estimated ops, for 1f1b and
// pipedream on 4 ranks (5e5 to 9.6e6 ops), zb-v on 4 ranks x 2 chunks (1.2e6 to 1.9e7 estimated
// ops) and 1f1b on 64 ranks (6e5 to 9.5e6 ops): 176 to 194 B per op (RelWithDebInfo, x86-64,
// glibc), rounded up.
inline constexpr double kBytesPerOp = 200;

// The default limit on the ops a command builds: at the limit `stagecraft simulate` takes 3.4 to
// 3.8 GB and 9 to 18 s of CPU time on one core (measured, user time: 1f1b with 2e7 ops on 4 ranks
// x 1,000,000 microbatches 9.1 s, on 1,024 ranks x 3,255 microbatches 18.0 s, on 65,536 ranks x
// 50 microbatches 15.8 s; an op costs more with more ranks, most of it Validate's deadlock
// search).
inline constexpr int64_t kDefaultMaxOps = 20'000'000;
// The largest limit a user may set (--max-ops, Python's max_ops), 10^15: far above what any
// machine holds, and exact in the double the estimates are compared in.
inline constexpr int64_t kMaxMaxOps = 1'000'000'000'000'000;

struct SizeEstimate {
  double ops = 0;    // an upper bound on Schedule::OpCount() after Lower()
  double bytes = 0;  // ops x kBytesPerOp

  // Several schedules held at once (simulate keeps each one and its run until it prints).
  SizeEstimate& operator+=(const SizeEstimate& other) {
    ops += other.ops;
    bytes += other.bytes;
    return *this;
  }
};

// Per (stage, microbatch, step): one F, and one B or an I + W pair (a family that may split its
// backward counts the pair); per stage boundary that crosses ranks (Shape::RankOf) and
// (microbatch, step): SEND_F, RECV_F, SEND_B, RECV_B; per stage and step one STEP, or per
// microbatch for PipeDream's weight stashing (WeightPolicy::kStash). Exact for the families
// with one B per unit; at most 1 + 1/(2 + 4 crossing boundaries per stage) above the count for
// the others. In double, so any parameters give a finite number. `params` need not pass
// CheckParams.
SizeEstimate EstimateSize(const GeneratorInfo& info, const GeneratorParams& params);

// The same for a schedule read from a file: `ops_per_step` ops (after lowering) repeated `steps`
// times.
SizeEstimate EstimateImportedSize(double ops_per_step, int64_t steps);

// Throws InputError when `estimate.ops` is above `max_ops`, e.g. "1f1b with 65536 ranks x
// 1000000 microbatches x 1 step: about 3.9e+11 ops (about 79 TB to simulate), above the limit
// of 2e+07 ops; raise it with --max-ops N". `what` names the schedule and its shape (as
// DescribeShape words it), or the schedules when several are summed.
void CheckSize(std::string_view what, const SizeEstimate& estimate, int64_t max_ops = kDefaultMaxOps);

// "1f1b with 65536 ranks x 2 chunks x 1000000 microbatches x 1 step" (chunks only when > 1).
std::string DescribeShape(std::string_view name, const GeneratorParams& params);

// How a command uses this (simulate, execute, schedule), with its flag
//   --max-ops N   (an integer >= 1, default kDefaultMaxOps)
// before it builds any schedule:
//   1. for each schedule it will generate, with the params it would pass to Generate
//      (sim::GeneratorParamsFor for a scenario):
//        const SizeEstimate e = schedules::EstimateSize(info, params);
//        schedules::CheckSize(schedules::DescribeShape(info.name, params), e, max_ops);
//   2. for a schedule file: import it for one step (CsvImportOptions::steps = 1), lower it, and
//        schedules::CheckSize(path, schedules::EstimateImportedSize(one_step.OpCount(), steps), max_ops);
//      before importing it for all its steps;
//   3. when it holds several schedules at once (simulate under `schedule: all` or a list), also
//      the sum: SizeEstimate total; total += e for each; CheckSize("the scenario's N schedules",
//      total, max_ops).
// The InputError thrown is the command's one line; nothing has been built or written by then.

}  // namespace stagecraft::schedules
