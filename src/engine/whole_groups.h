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
// metas' group names: they must outlive it. A group's members mostly come
// one after another: a run of them takes one lookup, not one each.
class WholeGroups {
 public:
  void Count(const RequestMeta& m) {
    if (m.group.empty()) return;
    ++*Counter(m.group, /*add=*/true);
  }
  bool Whole(const RequestMeta& m) const {
    if (m.group.empty()) return true;
    const uint32_t* ready = Counter(m.group, /*add=*/false);
    return ready != nullptr && *ready >= m.group_size;
  }

 private:
  // The count of `group` (null: none yet, unless `add`), the last one
  // looked up remembered (the map's values stay where they are).
  uint32_t* Counter(std::string_view group, bool add) const {
    if (last_ == nullptr || last_group_ != group) {
      auto it = ready_.find(group);
      if (it == ready_.end()) {
        if (!add) return nullptr;
        it = ready_.emplace(group, 0).first;
      }
      last_group_ = group;
      last_ = &it->second;
    }
    return last_;
  }

  mutable std::unordered_map<std::string_view, uint32_t> ready_;
  mutable std::string_view last_group_;
  mutable uint32_t* last_ = nullptr;
};

}  // namespace hora
