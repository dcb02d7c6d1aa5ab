// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "backends/comm_control_plane.h"

#include "collectives/bitwise_and.h"

namespace hora {
namespace {

class CommControlPlane final : public ControlPlane {
 public:
  CommControlPlane(Comm& control, CollectiveBackend& data) : comm_(control), data_(data) {}
  ~CommControlPlane() override { comm_.SetSubject(nullptr); }  // (the Comm outlives this)

  int rank() const override { return comm_.rank(); }
  int size() const override { return comm_.size(); }

  Status And(std::span<uint64_t> words) override { return AllreduceBitwiseAnd(comm_, words); }

  bool CanCarry(size_t words, size_t bytes) override {
    return BitwiseAndOnWindow(comm_, words) && (bytes == 0 || data_.CanCarry(comm_, words, bytes));
  }

  Result<bool> AndCarrying(std::span<uint64_t> words, const CarriedAllreduce* carried) override {
    return data_.AndCarrying(comm_, words, carried);
  }

  Status LostPeer() const override { return comm_.transport().LostPeer(); }

  std::optional<bool> PeerWaiting(size_t words) const override {
    // Only where the AND is a step of the window can one tell who waits.
    if (!BitwiseAndOnWindow(comm_, words)) return std::nullopt;
    return comm_.window()->PeerAhead();
  }

  Result<std::vector<std::vector<uint8_t>>> Gather(int root,
                                                   const std::vector<uint8_t>& mine) override {
    return GatherBytes(comm_, root, mine);
  }

  Status Broadcast(int root, std::vector<uint8_t>& data) override {
    return BroadcastBytes(comm_, root, data);
  }

  void SetSubject(std::function<std::string()> subject) override {
    comm_.SetSubject(std::move(subject));
  }

 private:
  Comm& comm_;
  CollectiveBackend& data_;
};

}  // namespace

std::unique_ptr<ControlPlane> CreateCommControlPlane(Comm& control, CollectiveBackend& data) {
  return std::make_unique<CommControlPlane>(control, data);
}

}  // namespace hora
