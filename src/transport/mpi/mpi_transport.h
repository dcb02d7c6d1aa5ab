// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// Transport over MPI point-to-point (transport.h), progressed in the
// caller's thread. Built only into the MPI plugins (mpi/mpi_plugin.h), one
// per MPI library, which hand it out through MpiLibrary::CreateTransport.
#pragma once

#include <mpi.h>

#include <memory>

#include "common/mutex.h"
#include "transport/transport.h"

namespace hora::mpi {

// A transport over `comm` (its own communicator, freed with it unless MPI
// is finalised by then). `mpi_mu` serialises the process's MPI calls (so
// that MPI_THREAD_SERIALIZED is enough) and must outlive it; `tag_bits`:
// the usable bits of an MPI tag (MPI_TAG_UB).
std::unique_ptr<Transport> NewMpiTransport(MPI_Comm comm, Mutex& mpi_mu, int tag_bits);

}  // namespace hora::mpi
