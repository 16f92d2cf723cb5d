// Lowering: insert SEND/RECV ops for every data dependency that crosses ranks.
//
// Ordering rule (the same as torch.distributed.pipelining's lowering): ranks are walked in
// lock step, one compute op per rank per round; when a producer is placed, its SEND is
// placed right after it and the matching RECV is appended to the consumer rank's list at
// that moment. A rank's compute op is placed only once its RECVs are in its list. Hence
// RECVs are posted early, every rank posts the receives of one channel (src -> dst) in the
// same order the sender posts the sends (FIFO matching works, as NCCL needs), and SEND/RECV
// only post: a compute op waits for the RECV of its input, nothing else blocks.
#pragma once

#include "stagecraft/base/error.h"
#include "stagecraft/schedules/ir.h"

namespace stagecraft::schedules {

// Returns the lowered schedule. Throws InputError if the compute order cannot be lowered
// (a rank waits on a producer that never comes: the compute-level deadlock Validate reports).
Schedule Lower(const Schedule& schedule);

// Drops SEND/RECV ops (compute_only form).
Schedule StripComms(const Schedule& schedule);

}  // namespace stagecraft::schedules
