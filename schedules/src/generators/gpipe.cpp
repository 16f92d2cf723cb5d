// GPipe (Huang et al., NeurIPS 2019): every rank runs all forwards of a step, then all
// backwards, then the optimizer step. Each rank stashes all m microbatches at once.
#include "stagecraft/schedules/generators.h"
#include "emit_util.h"

namespace stagecraft::schedules {

std::vector<std::vector<Op>> EmitGpipe(const GeneratorParams& p) {
  std::vector<std::vector<Op>> ops(p.ranks);
  for (int rank = 0; rank < p.ranks; ++rank) {
    for (int step = 0; step < p.steps; ++step) {
      for (int mb = 0; mb < p.microbatches; ++mb) ops[rank].push_back(detail::Compute(OpKind::kF, rank, mb, step));
      for (int mb = 0; mb < p.microbatches; ++mb) ops[rank].push_back(detail::Compute(OpKind::kB, rank, mb, step));
    }
  }
  return ops;
}

}  // namespace stagecraft::schedules
