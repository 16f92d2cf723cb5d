// A Transport for device memory that the inner transport cannot read itself: ranks that share a
// GPU, where NCCL cannot run, move their tensors over MPI through host buffers (pinned on a
// cuda device). Neither direction makes the host wait for the device's queue: a send queues
// the copy of the device data to a host buffer on the to-host stream (after the work that made
// it) and posts the inner send once that stream has run it, as a later Test, Isend or Irecv
// sees (a Wait waits for the copies and posts them: a peer may wait for one); a receive posts
// the inner receive into a host buffer and, when Test or Wait sees it complete, queues the copy
// to the device on the to-device stream, between the compute work queued before and after it.
// Only Device calls are used, so it runs on any device, and the tests run it on the cpu device
// against the same reference as MPI (and on a device whose copies wait to be run:
// staged_transport_test.cpp).
#pragma once

#include <memory>

#include "stagecraft/exec/device.h"
#include "stagecraft/exec/transport.h"

namespace stagecraft::exec {

// `device` must outlive the transport.
std::unique_ptr<Transport> MakeStagedTransport(std::unique_ptr<Transport> inner, Device& device);

}  // namespace stagecraft::exec
