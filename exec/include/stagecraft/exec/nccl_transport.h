// The cuda backend's Transport when every rank has a GPU of its own (DESIGN.md §5): tensors
// move GPU to GPU with ncclSend/ncclRecv, and the host transport (MPI) keeps the barriers, the
// gathers and the abort.
//
// - Channels: each direction between neighbouring ranks (NcclChannels in cuda_plan.h) has its
//   own two-rank communicator and its own non-blocking stream on both sides. Each channel's
//   sender makes its ncclUniqueId and sends it to the receiver over the host transport (MPI);
//   the communicators are created in the one order every rank agrees on.
// - Ordering: a send's stream waits (a CUDA event) for the compute stream's work queued so far,
//   which made the tensor; a receive's stream waits the same way before it writes, since its
//   buffer may have been freed by work still queued. Transfers then overlap the compute queued
//   after them. A completed receive orders the compute stream after it.
// - Test polls the transfer's event (nothing more: the runtime calls it after every op); Wait
//   polls it, and while it waits also every communicator's asynchronous error and the deadline. An error or a deadline aborts this
//   rank's communicators (ncclCommAbort) and throws one line naming the host, the rank, the
//   call or the transfer, file:line and NCCL's message; the command then ends every rank
//   through Abort, which aborts each rank's communicators before MPI ends the job.
#pragma once

#include <chrono>
#include <memory>

#include "stagecraft/exec/device.h"
#include "stagecraft/exec/transport.h"

namespace stagecraft::exec {

// Whether this build has NCCL (found with the CUDA toolkit when it was configured).
bool HaveNccl();

// Collective over every rank of `host`, which must be the MPI transport of the job; `device` is
// this rank's cuda device (MakeCudaDevice) and must outlive the transport. Throws
// std::runtime_error when this build has no NCCL or a communicator cannot be made.
std::unique_ptr<Transport> MakeNcclTransport(std::unique_ptr<Transport> host, Device& device,
                                             std::chrono::nanoseconds deadline = kDefaultWaitDeadline);

}  // namespace stagecraft::exec
