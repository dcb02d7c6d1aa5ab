// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// A build without NCCL's headers (nccl.h): no NCCL library, saying so.
#include "backends/nccl/nccl.h"
#include "hora/build_info.h"

namespace hora {

int NcclBuiltVersion() { return 0; }

Result<std::unique_ptr<NcclLibrary>> OpenNcclLibrary(const std::string&) {
  return UnimplementedError(
      "NCCL: this build of Hora has no NCCL support (nccl.h was not found when it was built)");
}

}  // namespace hora
