// A Transport for device memory that the inner transport cannot read itself: ranks that share a
// GPU, where NCCL cannot run, move their tensors over MPI through host buffers (pinned on a
// cuda device). A send copies the device data to a host buffer (after the work that made it)
// and posts the inner send; a receive posts the inner receive into a host buffer and copies it
// to the device when Test or Wait sees it complete. Only Device calls are used, so it runs on
// any device, and the tests run it on the cpu device against the same reference as MPI.
#pragma once

#include <memory>

#include "stagecraft/exec/device.h"
#include "stagecraft/exec/transport.h"

namespace stagecraft::exec {

// `device` must outlive the transport.
std::unique_ptr<Transport> MakeStagedTransport(std::unique_ptr<Transport> inner, Device& device);

}  // namespace stagecraft::exec
