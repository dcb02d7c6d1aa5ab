// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// TCP transport for ranks on different hosts: one authenticated connection
// per peer (tcp_mesh.h), nonblocking sockets driven by one I/O thread per
// transport (epoll). Messages are framed {tag, length} + payload.
//
// - A send is written from the calling thread as far as the socket takes it;
//   the rest is queued and written by a waiter on that peer or the I/O
//   thread. A send completes when its last byte is in the kernel's socket
//   buffer.
// - Receives: an arriving message goes straight into the matching posted
//   receive's buffer; IrecvReduce reads it in 256 KiB pieces into a staging
//   buffer and folds each piece into the destination as it arrives (transfer
//   and reduction overlap); a message nobody has asked for yet is kept until
//   a receive claims it.
// - Waits: a waiter on a request of up to 4 MiB (kTcpSpinBytes) moves its
//   peer's socket itself while bytes move and for a while after before it
//   sleeps, and meanwhile the peer is quiet: its arrivals do not wake the I/O
//   thread, which reads the socket again once a 10 ms tick passes with no
//   waiter reading it (or a waiter about to sleep hands it back). A request
//   waited on without Wait is read within about two ticks. WaitAlso does the
//   same while moving another transport (HybridTransport's shared memory).
// - A lost connection fails every pending request with that peer, naming it.
// - Liveness: the I/O thread sends a heartbeat frame to a peer it sent
//   nothing to for a fifth of TcpMeshOptions::peer_timeout (at least every
//   second); a peer from which nothing came for peer_timeout (stopped,
//   frozen, or the network cut) is lost like a closed connection. Every
//   rank watches every peer (the mesh is complete), and tells the others
//   which rank it lost.
#pragma once

#include <memory>

#include "transport/tcp/tcp_mesh.h"
#include "transport/transport.h"

namespace hora {

Result<std::unique_ptr<Transport>> CreateTcpTransport(Store& store, const TcpMeshOptions& options);

}  // namespace hora
