// The cuda backend's collective groups' shared part (nccl_collectives.h).
#include "nccl_collectives.h"

#include <stdexcept>
#include <vector>

#include "stagecraft/exec/cuda_device.h"
#include "stagecraft/exec/poll.h"
#include "stagecraft/kernels/cuda_check.h"

namespace stagecraft::exec {

NcclCollectives::NcclCollectives(Transport& host, int ranks, int rank, Device& device,
                                 std::chrono::nanoseconds deadline, const std::string& comm_name, Names names)
    : device_(device),
      compute_(static_cast<cudaStream_t>(CudaComputeStream(device))),
      deadline_ns_(deadline.count()),
      names_(names),
      group_(MakeNcclGroupComm(host, ranks, rank, deadline_ns_, comm_name)) {}

NcclCollectives::~NcclCollectives() {
  std::vector<cudaEvent_t> in_flight;
  for (const Pending& p : pending_.items()) in_flight.push_back(p.done);
  CloseNcclGroupComm(group_, in_flight, deadline_ns_);
}

void NcclCollectives::After() {
  cudaEvent_t queued = events_.Take();
  SC_CUDA_CHECK(cudaEventRecord(queued, compute_));
  SC_CUDA_CHECK(cudaStreamWaitEvent(group_.stream, queued, 0));
  events_.Give(queued);  // may be re-recorded once the wait is queued
}

int NcclCollectives::Enqueued(int64_t elements, ElementType type) {
  Pending p{done_events_.Take(), elements, type};
  SC_CUDA_CHECK(cudaEventRecord(p.done, group_.stream));
  return pending_.Add(p);
}

bool NcclCollectives::Test(int handle) {
  Pending& p = At(handle);
  const cudaError_t state = cudaEventQuery(p.done);
  if (state == cudaErrorNotReady) return false;
  if (state != cudaSuccess) {
    const std::string call = std::string("cudaEventQuery(") + names_.collective + " done)";
    Fail(kernels::CudaErrorText(state, call.c_str(), __FILE__, __LINE__));
  }
  SC_CUDA_CHECK(cudaStreamWaitEvent(compute_, p.done, 0));  // the work queued next reads the outputs
  completed_ns_ = CudaEventNs(device_, p.done);
  done_events_.Give(p.done);
  pending_.Release(handle);
  return true;
}

void NcclCollectives::Wait(int handle, int members) {
  const Pending p = At(handle);
  PollPolicy policy = kNcclPoll;
  policy.deadline_ns = deadline_ns_;
  if (PollUntil([&] { return NcclComms().CheckErrors({group_.comm}), Test(handle); }, policy)) return;
  NcclComms().AbortAll();
  throw TimeoutError(std::string("the NCCL ") + names_.collective + " of " + ElementCountText(p.elements, p.type) +
                     " over " + std::to_string(members) + " " + names_.members + " did not complete within " +
                     SecondsText(deadline_ns_) + ": a " + names_.member + " is hung or gone (" +
                     CommSet::kAbortedNote + ")");
}

void NcclCollectives::Fail(const std::string& what) {
  NcclComms().AbortAll();
  throw std::runtime_error(what + " (" + CommSet::kAbortedNote + ")");
}

NcclCollectives::Pending& NcclCollectives::At(int handle) {
  if (!pending_.Live(handle)) {
    throw std::logic_error(std::string("nccl ") + names_.collective + ": no pending " + names_.collective + " " +
                           std::to_string(handle));
  }
  return pending_[handle];
}

}  // namespace stagecraft::exec
