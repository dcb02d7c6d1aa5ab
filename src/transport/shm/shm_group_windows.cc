// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "transport/shm/shm_group_windows.h"

#include <algorithm>
#include <vector>

#include "transport/shm/shm_segment.h"
#include "transport/shm/shm_transport.h"
#include "transport/shm/shm_transport_impl.h"
#include "transport/shm/shm_window.h"

namespace hora {
namespace {

// A group's segments hold the windows of these contexts and on.
constexpr uint32_t kFirstContext = 1;

// "set<key>-win-<rank>-": how member `rank`'s segment name of group `key`
// starts after the job's prefix (its creator's tag follows).
std::string NameStart(const ShmTransport& t, uint64_t key, int rank) {
  return ShmSegmentName(t.job_id(),
                        "set" + std::to_string(key) + "-win-" + std::to_string(rank) + "-");
}

class ShmGroupWindows final : public GroupWindows {
 public:
  ShmGroupWindows(ShmTransport& t, const std::vector<int>& members, ShmSegment own,
                  std::vector<ShmSegment> peers, const std::vector<void*>& segments)
      : own_(std::move(own)), peers_(std::move(peers)) {
    for (uint32_t c = kFirstContext; c < kSharedWindowContexts; ++c) {
      windows_.push_back(std::make_unique<ShmWindow>(t, c, segments, members, kFirstContext));
    }
  }

  SharedWindow* Window(uint32_t context) override {
    if (context < kFirstContext || context >= kSharedWindowContexts) return nullptr;
    return windows_[context - kFirstContext].get();
  }
  Status Seal() override { return own_.Unlink(); }

 private:
  ShmSegment own_;
  std::vector<ShmSegment> peers_;  // mapped while the windows live
  std::vector<std::unique_ptr<ShmWindow>> windows_;
};

class ShmPendingGroupWindows final : public PendingGroupWindows {
 public:
  ShmPendingGroupWindows(ShmTransport& t, std::vector<int> members, uint64_t key, ShmSegment own)
      : t_(t), members_(std::move(members)), key_(key), own_(std::move(own)), token_(own_.name()) {}

  const std::string& token() const override { return token_; }

  Result<std::unique_ptr<GroupWindows>> Open(std::span<const std::string> tokens) override {
    if (tokens.size() != members_.size()) {
      return InvalidArgument("shared-memory windows of " + std::to_string(members_.size()) +
                             " ranks given " + std::to_string(tokens.size()) + " tokens");
    }
    std::vector<ShmSegment> peers;
    std::vector<void*> segments;
    for (size_t i = 0; i < members_.size(); ++i) {
      const int rank = members_[i];
      if (rank == t_.rank()) {
        segments.push_back(own_.data());
        continue;
      }
      const std::string& name = tokens[i];
      if (name.rfind(NameStart(t_, key_, rank), 0) != 0) {
        return UnavailableError(t_.Name(rank) + " offered '" + name +
                                "' as its side of a process set's shared-memory windows");
      }
      Result<ShmSegment> s =
          ShmSegment::Open(name, ShmWindowSegment::SegmentBytes(kFirstContext), false);
      if (!s.ok()) return s.status();
      HORA_RETURN_IF_ERROR(ShmWindowSegment::Check(s->data(), name, kFirstContext));
      segments.push_back(s->data());
      peers.push_back(std::move(*s));
    }
    return std::unique_ptr<GroupWindows>(
        new ShmGroupWindows(t_, members_, std::move(own_), std::move(peers), segments));
  }

 private:
  ShmTransport& t_;
  const std::vector<int> members_;
  const uint64_t key_;
  ShmSegment own_;
  const std::string token_;
};

}  // namespace

Result<std::unique_ptr<PendingGroupWindows>> PrepareShmGroupWindows(ShmTransport& t,
                                                                    std::span<const int> ranks,
                                                                    uint64_t key) {
  std::vector<int> members(ranks.begin(), ranks.end());
  if (std::find(members.begin(), members.end(), t.rank()) == members.end()) {
    return InvalidArgument(t.Name(t.rank()) + " is not in the group it makes windows for");
  }
  const std::string name = NameStart(t, key, t.rank()) + t.creator_tag();
  Result<ShmSegment> own =
      ShmSegment::Create(name, ShmWindowSegment::SegmentBytes(kFirstContext), false);
  if (!own.ok()) return own.status();
  ShmWindowSegment::Initialize(own->data(), kFirstContext);
  return std::unique_ptr<PendingGroupWindows>(
      new ShmPendingGroupWindows(t, std::move(members), key, std::move(*own)));
}

}  // namespace hora
