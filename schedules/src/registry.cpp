// The generator table: adding a schedule is one emitter file plus one row here.
#include "stagecraft/schedules/generators.h"

#include <fmt/format.h>

#include "stagecraft/base/error.h"
#include "stagecraft/base/stop.h"
#include "stagecraft/schedules/unit_index.h"
#include "stagecraft/schedules/weight_policy.h"
#include "stagecraft/schedules/weights.h"

namespace stagecraft::schedules {
namespace {

std::string NoCheck(const GeneratorParams&) { return {}; }

std::string CheckCommon(const GeneratorInfo& info, const GeneratorParams& p) {
  if (p.ranks < 1) return fmt::format("ranks must be >= 1 (got {})", p.ranks);
  if (p.microbatches < 1) return fmt::format("microbatches must be >= 1 (got {})", p.microbatches);
  if (p.steps < 1) return fmt::format("steps must be >= 1 (got {})", p.steps);
  if (p.chunks < 1) return fmt::format("chunks must be >= 1 (got {})", p.chunks);
  if (p.data_parallel < 1) return fmt::format("data_parallel must be >= 1 (got {})", p.data_parallel);
  if (!info.interleaved && p.chunks != 1) {
    return fmt::format("{} runs one stage per rank; chunks must be 1 (got {}); use interleaved", info.name, p.chunks);
  }
  if (p.vertical_sync && !TakesVerticalSync(info.weights)) {
    return fmt::format("vertical sync applies to pipedream only, not {}", info.name);
  }
  // At most 2^31 ops, 4 per unit: one factor at a time, so that four near 2^30 cannot overflow.
  int64_t units = 1;
  for (const int64_t factor : {p.ranks, p.chunks, p.microbatches, p.steps}) {
    units *= factor;
    if (units > kMaxUnits) {
      return fmt::format("schedule too large ({} ranks x {} chunks x {} microbatches x {} steps: over 2^31 ops)",
                         p.ranks, p.chunks, p.microbatches, p.steps);
    }
  }
  return info.check(p);
}

}  // namespace

int ChunksFor(const GeneratorInfo& info, int stated) { return stated > 0 ? stated : (info.interleaved ? 2 : 1); }

const std::vector<GeneratorInfo>& Generators() {
  static const std::vector<GeneratorInfo> kTable = {
      {"gpipe", "Huang et al., GPipe, NeurIPS 2019", WeightPolicy::kFlush, false, NoCheck, EmitGpipe},
      {"1f1b", "Narayanan et al., PipeDream-Flush, ICML 2021; Megatron-LM SC'21 §2.2.1", WeightPolicy::kFlush, false,
       NoCheck, EmitOneFOneB},
      {"pipedream", "Narayanan et al., PipeDream, SOSP 2019", WeightPolicy::kStash, false, NoCheck, EmitPipeDream},
      {"2bw", "Narayanan et al., PipeDream-2BW, ICML 2021 §3.1", WeightPolicy::kTwoBW, false, CheckTwoBW, EmitTwoBW},
      {"pipemare", "Yang et al., PipeMare: Asynchronous Pipeline Parallel DNN Training, MLSys 2021",
       WeightPolicy::kNoStash, false, NoCheck, EmitPipeMare},
      {"interleaved", "Narayanan et al., Megatron-LM, SC'21 §2.2.2", WeightPolicy::kFlush, true, CheckInterleaved,
       EmitInterleaved},
      {"interleaved-overlap", "Megatron-LM's combined 1F1B (--overlap-moe-expert-parallel-comm): interleaved 1F1B "
       "with each steady-state F;B an overlapped pair", WeightPolicy::kFlush, true, CheckInterleaved,
       EmitInterleavedOverlap, Placement::kLoop, false, false, true},
      {"zb-h1", "Qi et al., Zero Bubble Pipeline Parallelism, ICLR 2024, Fig. 3", WeightPolicy::kFlush, false, NoCheck,
       EmitZbH1},
      {"zb-h2", "Qi et al., Zero Bubble Pipeline Parallelism, ICLR 2024, Fig. 3", WeightPolicy::kFlush, false, NoCheck,
       EmitZbH2},
      {"zb-v", "Qi et al., Zero Bubble Pipeline Parallelism, ICLR 2024 §6 (ZB-V); PyTorch ScheduleZBVZeroBubble",
       WeightPolicy::kFlush, true, CheckZbV, EmitZbV, Placement::kV},
      {"dualpipe-v", "DeepSeek-V3 report §3.2.1 (DualPipe), its V variant in the DualPipe repository; PyTorch "
       "ScheduleDualPipeV", WeightPolicy::kFlush, true, CheckDualPipeV, EmitDualPipeV, Placement::kV},
      {"zb-1p", "Qi et al., Zero Bubble Pipeline Parallelism, ICLR 2024 §3 (automatic scheduling, limit p M_B)",
       WeightPolicy::kFlush, false, CheckZbAuto, EmitZb1p, Placement::kLoop, true},
      {"zb-2p", "Qi et al., Zero Bubble Pipeline Parallelism, ICLR 2024 §3 (automatic scheduling, limit 2p M_B)",
       WeightPolicy::kFlush, false, CheckZbAuto, EmitZb2p, Placement::kLoop, true},
      {"zb-auto", "Qi et al., Zero Bubble Pipeline Parallelism, ICLR 2024 §3 (automatic scheduling, limit: the "
       "rank's memory, pipeline.memory_limit)", WeightPolicy::kFlush, false, CheckZbAuto, EmitZbAuto, Placement::kLoop,
       true},
      {"spilled", "Nagrecha & Kumar, Hydra (spilled execution), arXiv 2110.08633; its ModelTask", WeightPolicy::kFlush,
       true, CheckSpilled, EmitSpilled, Placement::kLoop, false, false},
  };
  return kTable;
}

const GeneratorInfo* FindGenerator(std::string_view name) {
  for (const auto& info : Generators()) {
    if (info.name == name) return &info;
  }
  return nullptr;
}

std::string GeneratorNames() {
  std::string names;
  for (const auto& info : Generators()) names += (names.empty() ? "" : ", ") + std::string(info.name);
  return names;
}

std::string CheckParams(const GeneratorInfo& info, const GeneratorParams& params) {
  const std::string why = CheckCommon(info, params);
  return why.empty() ? why : fmt::format("{}: {}", info.name, why);
}

Schedule Generate(std::string_view name, const GeneratorParams& params, const std::atomic<bool>* stop) {
  const GeneratorInfo* info = FindGenerator(name);
  if (info == nullptr) throw InputError(fmt::format("unknown schedule '{}' (known: {})", name, GeneratorNames()));
  if (std::string why = CheckParams(*info, params); !why.empty()) throw InputError(why);
  Schedule s;
  s.name = std::string(name);
  s.shape = Shape{params.ranks, params.chunks, info->placement};
  s.microbatches = params.microbatches;
  s.steps = params.steps;
  s.weights = info->weights;
  s.recompute = params.recompute;
  s.vertical_sync = params.vertical_sync;
  s.data_parallel = params.data_parallel;
  s.ops = info->emit(params);
  ThrowIfStopped(stop);
  AssignWeights(&s);
  return s;
}

}  // namespace stagecraft::schedules
