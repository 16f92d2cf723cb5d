// Spilled execution (Nagrecha & Kumar, Hydra, and its repository's ModelTask): the model cut into
// shards (the chunks of the only rank) that run one after another on one device: every
// microbatch through shard 0, then shard 1, ..., then the backward through the shards in reverse,
// each shard's STEP after its last backward. The copies that make it spilled, each shard's
// weights and optimizer state brought in for its turn and sent back after, are placed by
// PlaceWeightSpill (offload.h), which the harness applies to it; Hydra recomputes a shard's
// intermediates from its saved input (pipeline.recompute: full).
#include <fmt/format.h>

#include "emit_util.h"
#include "stagecraft/schedules/generators.h"

namespace stagecraft::schedules {

std::string CheckSpilled(const GeneratorParams& p) {
  if (p.ranks != 1) {
    return fmt::format("spilled runs its shards one after another on one device: ranks must be 1 (got {}); its shards "
                       "are pipeline.chunks",
                       p.ranks);
  }
  return {};
}

std::vector<std::vector<Op>> EmitSpilled(const GeneratorParams& p) {
  std::vector<std::vector<Op>> ops(1);
  for (int step = 0; step < p.steps; ++step) {
    for (int shard = 0; shard < p.chunks; ++shard) {
      for (int mb = 0; mb < p.microbatches; ++mb) ops[0].push_back(detail::Compute(OpKind::kF, shard, mb, step));
    }
    for (int shard = p.chunks - 1; shard >= 0; --shard) {
      for (int mb = 0; mb < p.microbatches; ++mb) ops[0].push_back(detail::Compute(OpKind::kB, shard, mb, step));
    }
  }
  return ops;
}

}  // namespace stagecraft::schedules
