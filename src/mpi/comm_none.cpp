// A build without MPI (-DTESSERA_MPI=OFF): there is no job to join.
#include "core/check.h"
#include "mpi/comm.h"

namespace tessera::mpi {

std::unique_ptr<Comm> Comm::join() {
  raise(ErrorCode::Unsupported,
        "--pipeline: this build of Tessera has no MPI (configure with -DTESSERA_MPI=ON)");
}

}  // namespace tessera::mpi
