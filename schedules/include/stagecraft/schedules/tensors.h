// What each op reads and what each copy moves, as tensors of one stage (DESIGN.md §10): the one
// statement of which RELOAD an op waits for, read by validation, the simulator, the executor and
// the bubble split.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "stagecraft/schedules/ir.h"

namespace stagecraft::schedules {

// One tensor of one stage: activations by (step, microbatch), weights and optimizer state by
// version (the optimizer state of the update that produces that version).
struct TensorKey {
  Tensor tensor = Tensor::kNone;
  int32_t stage = 0, step = 0, microbatch = 0, version = 0;
  friend auto operator<=>(const TensorKey&, const TensorKey&) = default;
};

// Tensor `tensor` of `op`'s stage: for activations those of op's step and microbatch, else
// those of `version`.
TensorKey TensorOf(Tensor tensor, const Op& op, int version);
// The tensor an OFFLOAD or RELOAD moves.
inline TensorKey CopiedTensor(const Op& copy) { return TensorOf(copy.tensor, copy, copy.version); }

// The tensors a compute op or STEP reads, which must be on the device while it runs: a backward
// that frees a stage-microbatch's activations (B, I) reads them; F, B, I and W read their weight
// version; a STEP its base version and the optimizer state of its update. None for the rest.
struct TensorReads {
  std::array<TensorKey, 3> keys{};
  int count = 0;
  std::span<const TensorKey> view() const { return {keys.data(), static_cast<size_t>(count)}; }
};
TensorReads TensorsRead(const Op& op);

// "the activations of stage 1 step 0 microbatch 3", "version 2 of stage 0's weights", ...
std::string DescribeTensor(const TensorKey& key);

// The tensors of one rank's list whose first copy is a RELOAD: they start in host memory (a
// spilled stage's weight version 0 and optimizer state, schedules/offload.h). Activations never
// do: an F makes them on the device. Sorted.
std::vector<TensorKey> StartOnHost(std::span<const Op> ops);

// Per op of one rank's list (IR order), the copies it waits for, by index in that list: a
// compute op or STEP, the RELOAD that last brought back each tensor it reads (none for a tensor
// never offloaded); a RELOAD, the OFFLOAD that sent its tensor away. Empty for every other op,
// and for the whole list when it has no copies. Assumes a list that validates (CheckCopies).
std::vector<std::vector<int32_t>> CopyWaits(std::span<const Op> ops);

}  // namespace stagecraft::schedules
