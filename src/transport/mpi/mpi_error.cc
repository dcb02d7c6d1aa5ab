// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "transport/mpi/mpi_error.h"

#include <mpi.h>

namespace hora::mpi {

std::string MpiErrorString(int code) {
  char text[MPI_MAX_ERROR_STRING] = {};
  int len = 0;
  if (MPI_Error_string(code, text, &len) != MPI_SUCCESS) return "MPI error " + std::to_string(code);
  return std::string(text, static_cast<size_t>(len));
}

}  // namespace hora::mpi
