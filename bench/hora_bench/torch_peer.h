// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// The torch.distributed peer: every rank starts the Python script
// hora-bench-torch-peer.py (bench/python/torch_peer.py, copied beside the
// binary) with torch's rendezvous variables, which sweeps the same sizes
// with the gloo backend; rank 0's records come back as JSON.
#pragma once

#include <cstdint>
#include <vector>

#include "args.h"
#include "hora/hora.h"
#include "report.h"

namespace hora::bench {

// Every rank calls it. Returns rank 0's records (empty on other ranks); an
// error on any rank (the script failed, timed out) is an error on every rank.
Result<std::vector<Record>> RunTorchPeer(Session& session, const Args& args,
                                         const std::vector<uint64_t>& sizes, double timeout_s);

}  // namespace hora::bench
