// The communicator behind an MpiGroup (mpi_group.h), for exec's MPI sources.
#pragma once

#include <mpi.h>

#include "stagecraft/exec/mpi_group.h"

namespace stagecraft::exec {

struct MpiGroup::Impl {
  MPI_Comm comm = MPI_COMM_NULL;
  bool owned = false;  // freed with the last copy (the world's is MPI's own)
  int rank = 0;
  int size = 1;

  Impl() = default;
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;
  ~Impl() {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (owned && finalized == 0) MPI_Comm_free(&comm);
  }
};

inline MPI_Comm CommOf(const MpiGroup& group) { return group.impl().comm; }

}  // namespace stagecraft::exec
