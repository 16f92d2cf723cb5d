// The NCCL transport's, replica group's and all-to-all group's entry points in a build without
// NCCL (nccl_transport.h): ranks with a GPU each then move their tensors over host-staged MPI,
// and whoever asks for NCCL gets a clear error.
#include "stagecraft/exec/all_to_all.h"
#include "stagecraft/exec/nccl_transport.h"
#include "stagecraft/exec/replica_group.h"

#include <stdexcept>

#if !STAGECRAFT_WITH_NCCL
namespace stagecraft::exec {

bool HaveNccl() { return false; }
std::unique_ptr<Transport> MakeNcclTransport(std::unique_ptr<Transport>, Device&, std::chrono::nanoseconds) {
  throw std::runtime_error("this build has no NCCL (nccl.h and libnccl were not found when it was configured)");
}
std::unique_ptr<ReplicaGroup> MakeNcclReplicaGroup(std::unique_ptr<ReplicaGroup>, Device&, std::chrono::nanoseconds) {
  throw std::runtime_error("this build has no NCCL (nccl.h and libnccl were not found when it was configured)");
}
std::unique_ptr<AllToAllGroup> MakeNcclAllToAll(const MpiGroup&, Device&, std::chrono::nanoseconds) {
  throw std::runtime_error("this build has no NCCL (nccl.h and libnccl were not found when it was configured)");
}

}  // namespace stagecraft::exec
#endif
