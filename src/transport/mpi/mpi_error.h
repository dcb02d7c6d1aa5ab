// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#pragma once

#include <string>

namespace hora::mpi {

// "MPI_ERR_TRUNCATE: message truncated" for an MPI error code.
std::string MpiErrorString(int code);

}  // namespace hora::mpi
