// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// Process sets: adding and removing them (collective over the whole
// session, agreed with two allgathers so that every rank reaches the same
// verdict).
#include <algorithm>
#include <set>

#include "api/session_impl.h"

namespace hora {
namespace {

std::string ListText(std::span<const int32_t> ranks) { return "[" + RankListText(ranks) + "]"; }

// While it lives, the Session's own Comm names its waits (stall reports,
// timeouts) as `call`: the allgathers below are add_process_set's, which a
// rank that never calls it leaves waiting, not the user's allgather.
class CallSubject {
 public:
  CallSubject(Comm& comm, std::string call) : comm_(comm) {
    comm_.SetSubject([call = std::move(call)] { return call; });
  }
  ~CallSubject() { comm_.SetSubject(nullptr); }
  CallSubject(const CallSubject&) = delete;
  CallSubject& operator=(const CallSubject&) = delete;

 private:
  Comm& comm_;
};

// Every rank's list of int32 values, in rank order: each rank gives `mine`.
Result<std::vector<std::vector<int32_t>>> GatherLists(Session& session, std::vector<int32_t> mine) {
  int64_t count = static_cast<int64_t>(mine.size());
  HORA_ASSIGN_OR_RETURN(Tensor counts,
                        session.Allgather(TensorView::Flat(&count, DataType::kInt64, 1)));
  HORA_ASSIGN_OR_RETURN(Tensor values, session.Allgather(TensorView::Flat(
                                           mine.data(), DataType::kInt32, mine.size())));
  const auto* c = static_cast<const int64_t*>(counts.data());
  const auto* v = static_cast<const int32_t*>(values.data());
  std::vector<std::vector<int32_t>> lists(static_cast<size_t>(session.size()));
  for (auto& list : lists) {
    list.assign(v, v + *c);
    v += *c++;
  }
  return lists;
}

// Empty when every rank gave the same list; else "rank 0 gave [..], rank 2
// gave [..]" (rank 0 and each rank that differs from it).
std::string Disagreement(const std::vector<std::vector<int32_t>>& lists) {
  std::string s;
  for (size_t r = 1; r < lists.size(); ++r) {
    if (lists[r] == lists[0]) continue;
    if (s.empty()) s = "rank 0 gave " + ListText(lists[0]);
    s += ", rank " + std::to_string(r) + " gave " + ListText(lists[r]);
  }
  return s;
}

}  // namespace

Result<int> Session::AddProcessSet(std::span<const int> ranks) {
  MutexLock changing(impl_->set_changes_mu);
  const std::string where = impl_->Where("add_process_set");
  std::vector<int32_t> mine(ranks.begin(), ranks.end());
  std::sort(mine.begin(), mine.end());
  // Every rank sends its list, even a bad one, so that all reach one verdict.
  CallSubject subject(impl_->comm, "add_process_set(" + ListText(mine) + ")");
  HORA_ASSIGN_OR_RETURN(auto lists, GatherLists(*this, mine));
  const std::string disagree = Disagreement(lists);
  if (!disagree.empty()) {
    return InvalidArgument(where + ": ranks disagree on the process set: " + disagree);
  }
  const std::vector<int32_t>& agreed = lists[0];
  if (agreed.empty()) return InvalidArgument(where + ": a process set needs at least one rank");
  for (size_t i = 0; i < agreed.size(); ++i) {
    if (agreed[i] < 0 || agreed[i] >= size()) {
      return InvalidArgument(where + ": rank " + std::to_string(agreed[i]) + " of " +
                             ListText(agreed) + " is outside [0, " + std::to_string(size()) + ")");
    }
    if (i > 0 && agreed[i] == agreed[i - 1]) {
      return InvalidArgument(where + ": rank " + std::to_string(agreed[i]) + " is listed twice");
    }
  }
  std::vector<int> set_ranks(agreed.begin(), agreed.end());
  int slot = 0, id = 0;
  {
    MutexLock lock(impl_->engine_mu);
    std::set<int> slots;
    for (const auto& [id, set] : impl_->sets) {
      if (set->ranks == set_ranks) {
        return InvalidArgument(where + ": process set " + std::to_string(id) +
                               " already has ranks " + ListText(agreed));
      }
      slots.insert(set->slot);
    }
    while (slots.count(slot)) ++slot;
    if (slot >= ProcessSetState::kMaxSlots) {
      return InvalidArgument(where + ": " + std::to_string(impl_->sets.size()) +
                             " process sets exist, the most there can be at once; remove one");
    }
    id = impl_->next_set_id++;
  }
  // (Made outside the engine lock: its members exchange what its windows
  // need, and the engine calls of other threads take the lock meanwhile.)
  auto state = std::make_shared<ProcessSetState>(id, std::move(set_ranks), slot, *impl_->transport,
                                                 impl_->config, impl_->selector, &impl_->logger);
  // Every rank learns whether every member made it (an exchange may fail on
  // some members only), so that all keep the set, and its slot, or none.
  int32_t made = state->failed.ok() ? 1 : 0;
  const TensorView flag = TensorView::Flat(&made, DataType::kInt32, 1);
  HORA_RETURN_IF_ERROR(Allreduce(flag, flag, {ReduceOp::kMin}));
  if (!state->failed.ok()) return state->failed.WithContext(where);
  if (made == 0) {
    return UnavailableError(where + ": a member of " + state->Label() +
                            " could not make it with the others (it says why)");
  }
  {
    MutexLock lock(impl_->engine_mu);
    impl_->sets[id] = state;
    // Members start the set's engine now: an engine stops with a last cycle
    // among its members, so every member must have one.
    if (state->member()) StartEngine(*impl_, *state);
  }
  impl_->logger.Info("added " + state->Label());
  return state->id;
}

Status Session::RemoveProcessSet(int id) {
  MutexLock changing(impl_->set_changes_mu);
  const std::string where = impl_->Where("remove_process_set");
  CallSubject subject(impl_->comm, "remove_process_set(" + std::to_string(id) + ")");
  HORA_ASSIGN_OR_RETURN(auto lists, GatherLists(*this, {static_cast<int32_t>(id)}));
  const std::string disagree = Disagreement(lists);
  if (!disagree.empty()) {
    return InvalidArgument(where + ": ranks disagree on the process set to remove: " + disagree);
  }
  if (id == 0) return InvalidArgument(where + ": the global process set (0) cannot be removed");
  std::shared_ptr<ProcessSetState> gone;
  {
    MutexLock lock(impl_->engine_mu);
    auto it = impl_->sets.find(id);
    if (it == impl_->sets.end()) {
      return InvalidArgument(where + ": there is no process set " + std::to_string(id) +
                             " (never added, or removed)");
    }
    gone = std::move(it->second);
    impl_->sets.erase(it);
  }
  if (gone->engine)
    gone->engine->SetStopReason(gone->Label() + " was removed (remove_process_set)");
  impl_->logger.Info("removing " + gone->Label());
  return Status::Ok();  // `gone` stops the set's engine (with its members) here
}

std::map<int, std::vector<int>> Session::ProcessSets() const {
  MutexLock lock(impl_->engine_mu);
  std::map<int, std::vector<int>> out;
  for (const auto& [id, set] : impl_->sets) out[id] = set->ranks;
  return out;
}

}  // namespace hora
