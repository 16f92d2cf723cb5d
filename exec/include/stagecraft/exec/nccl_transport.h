// The cuda backend's Transport when every rank has a GPU of its own (DESIGN.md §5): tensors
// move GPU to GPU with ncclSend/ncclRecv, and the host transport (MPI) keeps the barriers, the
// gathers and the abort.
//
// - Channels: each direction a run sends over (its routes, Transport::Prepare; NcclChannelsOf in
//   cuda_plan.h) has its own two-rank communicator and its own non-blocking stream on both
//   sides; only those a schedule uses are made (1F1B's pipeline has no wrap-around channel), when
//   the first run that uses them prepares. Each channel's sender makes its ncclUniqueId and sends
//   it to the receiver over the host transport (MPI); a rank's new communicators are made
//   together (one ncclGroupStart/End) and non-blocking (nccl_comms.h: 1 to 4 CTAs each, no thread
//   block clusters), and waited for by polling under the deadline, so a peer that dies there
//   ends the wait at the deadline instead of hanging it.
// - Connections: NCCL connects a channel at its first transfer of a size's protocol; Prepare
//   moves one tensor of each route's size before the run's clock starts, every wait under the
//   deadline, then meets every rank (their clocks start together).
// - Ordering: a send's stream waits (a CUDA event) for the compute stream's work queued so far,
//   which made the tensor; a receive's stream waits the same way before it writes, since its
//   buffer may have been freed by work still queued. Transfers then overlap the compute queued
//   after them. A receive's consumer waits on the device (OrderAfter: the compute stream waits on
//   the receive's event), so the host never blocks on a receive before queueing the work after it.
// - Test polls the transfer's event (nothing more: the runtime calls it after every op); Wait
//   polls it, and while it waits also every channel's asynchronous error and the deadline. An
//   error or a deadline aborts every NCCL communicator of the process (the replicas' too) and
//   throws one line naming the host, the rank, the call or the transfer, file:line and NCCL's
//   message; the command then ends every rank through Abort, which aborts them before MPI ends
//   the job. The destructor gives transfers in flight and each communicator's finalize a bounded
//   time, then aborts.
#pragma once

#include <chrono>
#include <memory>

#include "stagecraft/exec/device.h"
#include "stagecraft/exec/transport.h"

namespace stagecraft::exec {

// Whether this build has NCCL (found with the CUDA toolkit when it was configured).
bool HaveNccl();

// Over `host`, the MPI transport of the job (Prepare is collective over its ranks); `device` is
// this rank's cuda device (MakeCudaDevice) and must outlive the transport. Makes no communicator
// yet (Prepare does). Throws std::runtime_error when this build has no NCCL.
std::unique_ptr<Transport> MakeNcclTransport(std::unique_ptr<Transport> host, Device& device,
                                             std::chrono::nanoseconds deadline = kDefaultWaitDeadline);

}  // namespace stagecraft::exec
