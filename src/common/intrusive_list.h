// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// A doubly linked list threaded through its elements: no allocation, O(1)
// append and removal of any element. T names its two link members for this
// list (an element may be on several lists, one pair of links each).
//
//   struct Item { Item* prev = nullptr; Item* next = nullptr; };
//   IntrusiveList<Item, &Item::prev, &Item::next> list;
//   list.PushBack(&a);
//   for (Item* i = list.front(); i != nullptr; i = i->next) ...
//
// Not thread-safe; the caller keeps track of which elements are on it.
#pragma once

#include <cstddef>

namespace hora {

template <typename T, T* T::*Prev, T* T::*Next>
class IntrusiveList {
 public:
  T* front() const { return first_; }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }

  // `t` must not be on this list.
  void PushBack(T* t) {
    t->*Prev = last_;
    t->*Next = nullptr;
    (last_ ? last_->*Next : first_) = t;
    last_ = t;
    ++size_;
  }
  // `t` must be on this list.
  void Remove(T* t) {
    (t->*Prev ? (t->*Prev)->*Next : first_) = t->*Next;
    (t->*Next ? (t->*Next)->*Prev : last_) = t->*Prev;
    t->*Prev = t->*Next = nullptr;
    --size_;
  }

 private:
  T* first_ = nullptr;
  T* last_ = nullptr;
  size_t size_ = 0;
};

}  // namespace hora
