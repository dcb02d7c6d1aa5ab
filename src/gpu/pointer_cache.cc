// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "gpu/pointer_cache.h"

namespace hora::gpu {
namespace {

bool Holds(const PointerInfo& info, uintptr_t p) {
  // (A zero-byte allocation holds its start.)
  return p >= info.base && (p < info.base + info.size || p == info.base);
}

}  // namespace

Result<PointerInfo> PointerCache::Lookup(const void* ptr) {
  const auto p = reinterpret_cast<uintptr_t>(ptr);
  Slot& slot = slots_[SlotOf(p)];
  Entry* e = slot.pointer == p && slot.entry != nullptr ? slot.entry : FindRange(p);
  if (e == nullptr) return Ask(p);
  if (policy_ == Policy::kVerify && e->verified != epoch_) {
    const uint64_t id = e->info.buffer_id;
    ++queries_;
    HORA_ASSIGN_OR_RETURN(const PointerInfo now, device_.QueryPointer(ptr));
    if (now.buffer_id != id || now.base != e->info.base) {
      Drop(e->info.base);  // freed and allocated again: another allocation
      return Ask(p, now);
    }
    e->verified = epoch_;
  }
  ++hits_;
  slot = {p, e};
  return e->info;
}

PointerCache::Entry* PointerCache::FindRange(uintptr_t p) {
  auto it = by_base_.upper_bound(p);
  if (it == by_base_.begin()) return nullptr;
  --it;
  return Holds(it->second.info, p) ? &it->second : nullptr;
}

Result<PointerInfo> PointerCache::Ask(uintptr_t p) {
  ++queries_;
  HORA_ASSIGN_OR_RETURN(const PointerInfo info, device_.QueryPointer(reinterpret_cast<void*>(p)));
  return Ask(p, info);
}

Result<PointerInfo> PointerCache::Ask(uintptr_t p, const PointerInfo& info) {
  if (info.kind == MemoryKind::kHost) return info;  // (no range to cache)
  // A range cached earlier that overlaps this one was freed meanwhile.
  auto it = by_base_.lower_bound(info.base);
  while (it != by_base_.end() && it->first < info.base + std::max<size_t>(info.size, 1)) {
    Drop((it++)->first);
  }
  if (Entry* old = FindRange(info.base)) Drop(old->info.base);
  Entry& e = by_base_[info.base];
  e = {info, epoch_};
  slots_[SlotOf(p)] = {p, &e};
  return info;
}

void PointerCache::Drop(uintptr_t base) {
  auto it = by_base_.find(base);
  if (it == by_base_.end()) return;
  for (Slot& s : slots_) {
    if (s.entry == &it->second) s = {};
  }
  by_base_.erase(it);
}

void PointerCache::Clear() {
  by_base_.clear();
  slots_ = {};
}

}  // namespace hora::gpu
