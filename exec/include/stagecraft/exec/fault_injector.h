// Failure handling under test (`execute --inject-fault RANK:STEP[:KIND]`, RunHooks): at its first
// compute op of the fault's step, the fault's rank throws, hangs, turns one weight into NaN or
// asks its device for more memory than any has.
#pragma once

#include "stagecraft/exec/device.h"
#include "stagecraft/exec/runtime.h"
#include "stagecraft/schedules/ir.h"

namespace stagecraft::exec {

class FaultInjector {
 public:
  FaultInjector(const RunHooks& hooks, int rank)
      : fault_(hooks.fault), step_(hooks.fault_step), armed_(hooks.fault_rank == rank), rank_(rank) {}

  // Whether the fault hits before `op` runs: a compute op of the fault's step on its rank, and
  // the fault has not hit yet.
  bool Due(const schedules::Op& op) const { return armed_ && op.step == step_ && schedules::IsCompute(op.kind); }
  // Injects it before `op` (`microbatches` per step name the op): kThrow throws
  // std::runtime_error, kHang never returns, kOom throws OutOfMemory from a real allocation of
  // `device`, kNan writes NaN into the first float of `newest_weights` (the newest version of
  // op's stage) and returns. A fault that returns or is caught does not hit again.
  void Inject(const schedules::Op& op, int microbatches, Device& device, float* newest_weights);

 private:
  RunHooks::Fault fault_;
  int step_;
  bool armed_;
  int rank_;
};

}  // namespace stagecraft::exec
