// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "transport/loopback/loopback_group_windows.h"

#include <algorithm>
#include <vector>

namespace hora {
namespace {

constexpr uint32_t kFirstContext = 1;  // the group's data and control windows

class LoopbackGroupWindows final : public GroupWindows {
 public:
  LoopbackGroupWindows(std::shared_ptr<LoopbackHub> hub,
                       std::vector<std::unique_ptr<LoopbackWindow>> windows)
      : hub_(std::move(hub)), windows_(std::move(windows)) {}

  SharedWindow* Window(uint32_t context) override {
    if (context < kFirstContext || context >= kSharedWindowContexts) return nullptr;
    return windows_[context - kFirstContext].get();
  }
  Status Seal() override { return Status::Ok(); }

 private:
  std::shared_ptr<LoopbackHub> hub_;  // the windows' (outlives them)
  std::vector<std::unique_ptr<LoopbackWindow>> windows_;
};

class LoopbackPendingGroupWindows final : public PendingGroupWindows {
 public:
  LoopbackPendingGroupWindows(std::shared_ptr<LoopbackHub> hub, int rank, int generation,
                              std::vector<int> members, uint64_t key)
      : hub_(std::move(hub)), rank_(rank), generation_(generation), members_(std::move(members)) {
    for (uint32_t c = kFirstContext; c < kSharedWindowContexts; ++c) {
      groups_.push_back(hub_->WindowGroup(c, generation_, key, static_cast<int>(members_.size())));
    }
  }

  const std::string& token() const override { return token_; }

  Result<std::unique_ptr<GroupWindows>> Open(std::span<const std::string> tokens) override {
    if (tokens.size() != members_.size()) {
      return InvalidArgument("shared windows of " + std::to_string(members_.size()) +
                             " ranks given " + std::to_string(tokens.size()) + " tokens");
    }
    const int me =
        static_cast<int>(std::find(members_.begin(), members_.end(), rank_) - members_.begin());
    std::vector<std::unique_ptr<LoopbackWindow>> windows;
    for (uint32_t c = kFirstContext; c < kSharedWindowContexts; ++c) {
      windows.push_back(std::make_unique<LoopbackWindow>(me, static_cast<int>(members_.size()), c,
                                                         groups_[c - kFirstContext], *hub_,
                                                         generation_, members_));
    }
    return std::unique_ptr<GroupWindows>(new LoopbackGroupWindows(hub_, std::move(windows)));
  }

 private:
  std::shared_ptr<LoopbackHub> hub_;
  const int rank_;
  const int generation_;
  const std::vector<int> members_;
  std::vector<std::shared_ptr<LoopbackWindowGroup>> groups_;  // by context from kFirstContext
  const std::string token_ = "loopback";
};

}  // namespace

Result<std::unique_ptr<PendingGroupWindows>> PrepareLoopbackGroupWindows(
    std::shared_ptr<LoopbackHub> hub, int rank, int generation, std::span<const int> ranks,
    uint64_t key) {
  std::vector<int> members(ranks.begin(), ranks.end());
  if (std::find(members.begin(), members.end(), rank) == members.end()) {
    return InvalidArgument("rank " + std::to_string(rank) +
                           " is not in the group it makes windows for");
  }
  return std::unique_ptr<PendingGroupWindows>(
      new LoopbackPendingGroupWindows(std::move(hub), rank, generation, std::move(members), key));
}

}  // namespace hora
