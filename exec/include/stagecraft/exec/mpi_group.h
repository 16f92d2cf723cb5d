// Groups of the job's processes as MPI communicators: the world, one per process (made from
// MPI_COMM_WORLD), and the groups split from it by a key (MPI_Comm_split). Every transport and
// collective group of the executor runs over a group split from the world: the pipeline's
// point-to-point group (transport.h), each pipeline rank's replica group (replica_group.h), an
// all-to-all group (all_to_all.h). mpi.h stays out of this header.
#pragma once

#include <memory>

namespace stagecraft::exec {

// Which part of a split a process joins: the processes that give the same `color`, ranked by
// `key` (ties by their rank in the group split), as MPI_Comm_split.
struct GroupKey {
  int color = 0;
  int key = 0;
  bool operator==(const GroupKey&) const = default;
};

// A communicator; copies share it, and the last one frees it (unless MPI has ended). Every call
// but rank(), size() and WorldRankOf is collective over the group's processes.
class MpiGroup {
 public:
  // The process's world: every process of the job, ranked as MPI_COMM_WORLD. Requires a live
  // MpiSession (mpi_transport.h); not collective (it is made once, at the first call).
  static MpiGroup World();

  int rank() const;
  int size() const;
  // The world rank of this group's rank `rank`.
  int WorldRankOf(int rank) const;

  // The part of this group that passes the same key.color, each process naming its own part.
  MpiGroup Split(GroupKey key) const;
  // The same processes over a communicator of their own, so that what runs over it never
  // matches another's messages or collectives: the all-reduce and all-to-all groups dup the group
  // they are made over (a transport shares it: mpi_transport.h).
  MpiGroup Dup() const;

  // The communicator, for exec's MPI sources (exec/src/mpi_group_impl.h).
  struct Impl;
  const Impl& impl() const { return *impl_; }

 private:
  explicit MpiGroup(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<const Impl> impl_;
};

}  // namespace stagecraft::exec
