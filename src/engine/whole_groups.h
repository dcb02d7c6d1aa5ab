// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#pragma once

#include <cstdint>
#include <string_view>
#include <unordered_map>

#include "engine/messages.h"

namespace hora {

// The group rule: the members of a group (a grouped allreduce, say) run in
// a cycle only all together. Count every ready tensor, then ask of each
// whether its group is whole. One rule for the fast path's decisions and
// for the carried allreduce's prediction. Holds views of the counted
// metas' group names: they must outlive it.
class WholeGroups {
 public:
  void Count(const RequestMeta& m) {
    if (!m.group.empty()) ++ready_[m.group];
  }
  bool Whole(const RequestMeta& m) const {
    if (m.group.empty()) return true;
    const auto it = ready_.find(m.group);
    return it != ready_.end() && it->second >= m.group_size;
  }

 private:
  std::unordered_map<std::string_view, uint32_t> ready_;
};

}  // namespace hora
