// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// The receiving half of the TCP transport: reads frames, matches them to
// posted receives (or keeps them until a receive claims them), reduces
// pieces as they arrive, and handles control frames and the end of a stream.
#include "transport/tcp/tcp_transport_impl.h"

namespace hora::tcp_internal {

bool TcpTransport::ReadSome(size_t i) {
  Peer& p = peers_[i];
  while (true) {
    if (!p.in_payload) {
      ssize_t r = recv(p.fd.get(), reinterpret_cast<char*>(&p.in_header) + p.in_header_done,
                       sizeof(Header) - p.in_header_done, 0);
      if (r == 0) return PeerEnded(i);
      if (r < 0) {
        if (errno == EAGAIN || errno == EINTR) return true;
        FailPeer(i, std::strerror(errno));
        return false;
      }
      p.in_header_done += static_cast<size_t>(r);
      moved_ += static_cast<uint64_t>(r);
      p.bytes_in += static_cast<uint64_t>(r);
      if (p.in_header_done < sizeof(Header)) continue;
      if (p.in_header.tag == kHeartbeatTag) {
        p.in_header_done = 0;
        continue;
      }
      if (p.in_header.tag == kLostPeerTag) {
        PeerReportedLoss(i, p.in_header.bytes);
        p.in_header_done = 0;
        continue;
      }
      if (p.in_header.tag == kGoodbyeTag) {
        p.said_goodbye = true;
        p.in_header_done = 0;
        continue;
      }
      p.in_payload = true;
      p.in_done = 0;
      p.in_discard = false;
      p.in_target.reset();
      for (auto it = p.posted.begin(); it != p.posted.end(); ++it) {
        if (it->tag != p.in_header.tag) continue;
        p.in_target = std::move(*it);
        p.posted.erase(it);
        break;
      }
      if (p.in_target && p.in_target->bytes != p.in_header.bytes) {
        p.in_target->request->Complete(SizeMismatch(*p.in_target, p.in_header.bytes));
        p.in_discard = true;
      }
      if (!p.in_target) p.in_unexpected = pool_.Take(p.in_header.bytes);
    }
    // Payload.
    const size_t left = p.in_header.bytes - p.in_done;
    if (left > 0) {
      char* dst;
      size_t want = left;
      const bool reduce = p.in_target && p.in_target->reduce && !p.in_discard;
      if (p.in_discard || reduce) {
        if (p.stage.size() < kStageBytes) p.stage.resize(kStageBytes);
        dst = p.stage.data();
        want = std::min(left, kStageBytes);
        if (reduce) {  // whole elements only, so each piece reduces alone
          const size_t es = DataTypeSize(p.in_target->reduce->dtype);
          const size_t partial = p.in_done % es;
          dst += partial;
          want = std::min(want, kStageBytes - partial);
        }
      } else if (p.in_target) {
        dst = p.in_target->data + p.in_done;
      } else {
        dst = reinterpret_cast<char*>(p.in_unexpected.data.get()) + p.in_done;
      }
      ssize_t r = recv(p.fd.get(), dst, want, 0);
      if (r == 0) return PeerEnded(i);
      if (r < 0) {
        if (errno == EAGAIN || errno == EINTR) return true;
        FailPeer(i, std::strerror(errno));
        return false;
      }
      if (reduce) {
        const ReduceSpec& spec = *p.in_target->reduce;
        const size_t es = DataTypeSize(spec.dtype);
        const size_t partial = p.in_done % es;
        const size_t have = partial + static_cast<size_t>(r);
        const size_t whole = have / es;
        spec.reduce(spec.dtype, spec.op, p.in_target->data + (p.in_done - partial), p.stage.data(),
                    whole);
        std::memmove(p.stage.data(), p.stage.data() + whole * es, have - whole * es);
      }
      p.in_done += static_cast<size_t>(r);
      moved_ += static_cast<uint64_t>(r);
      p.bytes_in += static_cast<uint64_t>(r);
      if (p.in_done < p.in_header.bytes) continue;
    }
    // Message complete.
    if (p.in_target && !p.in_discard) {
      p.in_target->request->Complete(Status::Ok());
    } else if (!p.in_target) {
      // A receive may have been posted while this message was arriving.
      auto it = std::find_if(p.posted.begin(), p.posted.end(),
                             [&](const RecvOp& op) { return op.tag == p.in_header.tag; });
      if (it != p.posted.end()) {
        RecvOp op = std::move(*it);
        p.posted.erase(it);
        Finish(op, reinterpret_cast<const char*>(p.in_unexpected.data.get()),
               p.in_unexpected.bytes);
        pool_.Give(std::move(p.in_unexpected));
      } else {
        p.unexpected.push_back({p.in_header.tag, std::move(p.in_unexpected)});
      }
      p.in_unexpected = {};
    }
    p.in_target.reset();
    p.in_payload = false;
    p.in_header_done = 0;
  }
}

}  // namespace hora::tcp_internal
