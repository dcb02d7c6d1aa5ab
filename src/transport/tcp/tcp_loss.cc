// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// A rank lost, reported lost, or closing on purpose: which requests fail,
// and what the other peers are told (tcp_transport.h has the contract).
#include "transport/tcp/tcp_transport_impl.h"

namespace hora::tcp_internal {

void TcpTransport::FailPeer(size_t i, const std::string& why) {
  Peer& p = peers_[i];
  if (p.broken) return;
  if (p.said_goodbye) {
    // (A reset, or a write refused, after its goodbye: it closed on
    // purpose, and is not lost. Only requests with it fail.)
    (void)PeerEnded(i);
    return;
  }
  p.broken = true;
  p.broken_reason = why;
  if (lost_.ok()) {
    lost_ = UnavailableError("connection to rank " + std::to_string(i) + " lost: " + why);
    for (size_t j = 0; j < peers_.size(); ++j) {
      if (j == i || !peers_[j].fd.valid() || peers_[j].broken) continue;
      peers_[j].sends.push_back({{kLostPeerTag, i},
                                 nullptr,
                                 {},
                                 0,
                                 std::make_shared<RequestState>(true, static_cast<int>(j), 0)});
    }
    Wake();
  }
  FailAllPending(lost_);
}

void TcpTransport::PeerReportedLoss(size_t reporter, uint64_t lost) {
  if (!lost_.ok()) return;
  lost_ = UnavailableError("rank " + std::to_string(lost) + " was lost (rank " +
                           std::to_string(reporter) + " lost its connection to it)");
  FailAllPending(lost_);
}

void TcpTransport::FailAllPending(const Status& st) {
  for (Peer& q : peers_) {
    for (auto& r : q.posted) r.request->Complete(st);
    q.posted.clear();
    if (q.in_target) {
      q.in_target->request->Complete(st);
      q.in_discard = true;
    }
    // Queued data sends fail; control frames still go out.
    for (auto it = q.sends.begin(); it != q.sends.end();) {
      if (IsControl(it->header.tag) || it->done > 0) {
        ++it;
        continue;
      }
      it->request->Complete(st);
      it = q.sends.erase(it);
    }
  }
}

bool TcpTransport::PeerEnded(size_t i) {
  Peer& p = peers_[i];
  p.at_eof = true;
  if (!p.said_goodbye) {
    FailPeer(i, "connection closed by peer (process gone?)");
    return false;
  }
  if (!p.broken) {
    p.broken = true;
    p.broken_reason = "rank " + std::to_string(i) + " closed its session";
    const Status st = UnavailableError(p.broken_reason);
    for (auto& r : p.posted) r.request->Complete(st);
    p.posted.clear();
    for (auto& q : p.sends) q.request->Complete(st);
    p.sends.clear();
  }
  return false;
}

}  // namespace hora::tcp_internal
