// Interop with PyTorch torch.distributed.pipelining CSV schedules: one row per rank, one
// action per cell ("0F0", "2I1", "0W3", "1SEND_F0"), empty cells are idle slots. Both the
// compute_only and the compute_comms forms; PyTorch's sharding actions (UNSHARD, RESHARD,
// REDUCE_GRAD) are read and skipped; an overlapped pair "(0F7;7B3)OVERLAP_F_B" (DualPipe) is read
// as its two ops, the second marked Op::overlapped, and written back as one cell. Microbatch
// indices in the file are global (step * microbatches + microbatch); STEP ops are not written,
// AssignWeights rebuilds them.
#pragma once

#include <string>
#include <string_view>

#include "stagecraft/base/error.h"
#include "stagecraft/schedules/ir.h"

namespace stagecraft::schedules {

enum class CsvForm { kComputeOnly, kComputeComms };

// Throws InputError for a schedule with copies (OFFLOAD, RELOAD): PyTorch's actions have no form
// for them.
std::string ExportCsv(const Schedule& schedule, CsvForm form);

struct CsvImportOptions {
  std::string name = "imported";
  // Stages per rank and their placement; chunks 0 infers both from the file, as PyTorch's
  // validator does: chunks from the highest stage index, the loop placement when every row's
  // stages fit it, else the V.
  int chunks = 1;
  Placement placement = Placement::kLoop;
  int microbatches = 0;       // per step; 0 = all microbatches in the file form one step
  int steps = 1;
  // The file holds one step (microbatches 0 .. microbatches − 1), run `steps` times over.
  bool repeat_one_step = false;
  WeightPolicy weights = WeightPolicy::kFlush;
};

// Parses `text` (named `source` in errors). Throws InputError "source:row:col: ..." on a
// malformed cell. The result is unlowered when the file has no SEND/RECV cells, lowered
// otherwise; versions and STEPs are assigned by policy. Call Validate on it.
Schedule ImportCsv(std::string_view text, std::string_view source, const CsvImportOptions& options);

}  // namespace stagecraft::schedules
