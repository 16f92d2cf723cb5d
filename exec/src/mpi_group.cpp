// MpiGroup (mpi_group.h): the world and its splits, every MPI call checked.
#include "stagecraft/exec/mpi_group.h"

#include <mpi.h>

#include <memory>

#include <fmt/format.h>

#include "mpi_check.h"
#include "mpi_group_impl.h"
#include "stagecraft/base/check.h"

namespace stagecraft::exec {
namespace {

// A group over `comm`, which it frees when `owned`.
std::shared_ptr<MpiGroup::Impl> Wrap(MPI_Comm comm, bool owned) {
  auto impl = std::make_shared<MpiGroup::Impl>();
  impl->comm = comm;
  impl->owned = owned;
  SC_MPI_CHECK(MPI_Comm_rank(comm, &impl->rank));
  SC_MPI_CHECK(MPI_Comm_size(comm, &impl->size));
  return impl;
}

}  // namespace

MpiGroup MpiGroup::World() {
  int initialized = 0;
  MPI_Initialized(&initialized);
  SC_CHECK(initialized != 0, "MpiGroup::World needs a live MpiSession");
  static const std::shared_ptr<const Impl> world = Wrap(MPI_COMM_WORLD, /*owned=*/false);
  return MpiGroup(world);
}

int MpiGroup::rank() const { return impl_->rank; }
int MpiGroup::size() const { return impl_->size; }

int MpiGroup::WorldRankOf(int rank) const {
  SC_CHECK(rank >= 0 && rank < impl_->size, fmt::format("rank {} of a group of {}", rank, impl_->size));
  MPI_Group mine = MPI_GROUP_NULL, world = MPI_GROUP_NULL;
  SC_MPI_CHECK(MPI_Comm_group(impl_->comm, &mine));
  SC_MPI_CHECK(MPI_Comm_group(MPI_COMM_WORLD, &world));
  int world_rank = MPI_UNDEFINED;
  const int translated = MPI_Group_translate_ranks(mine, 1, &rank, world, &world_rank);
  MPI_Group_free(&mine);
  MPI_Group_free(&world);
  SC_MPI_CHECK(translated);
  return world_rank;
}

MpiGroup MpiGroup::Split(GroupKey key) const {
  SC_CHECK(key.color >= 0, fmt::format("a split's colour is not negative (got {})", key.color));
  MPI_Comm part = MPI_COMM_NULL;
  SC_MPI_CHECK(MPI_Comm_split(impl_->comm, key.color, key.key, &part));
  return MpiGroup(Wrap(part, /*owned=*/true));
}

MpiGroup MpiGroup::Dup() const {
  MPI_Comm copy = MPI_COMM_NULL;
  SC_MPI_CHECK(MPI_Comm_dup(impl_->comm, &copy));
  return MpiGroup(Wrap(copy, /*owned=*/true));
}

}  // namespace stagecraft::exec
