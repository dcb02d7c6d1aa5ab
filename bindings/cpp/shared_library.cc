// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// libhora.so, the C++ API as a shared library for installed use
// (find_package(Hora), pkg-config hora): the whole of hora_core linked in,
// see the top-level CMakeLists.txt. This file only gives the target a
// source of its own. Being a shared object beside the MPI plugins, it lets
// HORA_TRANSPORT=mpi find them (src/mpi/mpi_loader.cc looks beside the
// Hora code) in an installed tree.
