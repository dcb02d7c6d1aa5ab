// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "api/process_set_windows.h"

#include <cstring>
#include <string>
#include <vector>

#include "collectives/algorithms.h"
#include "collectives/comm.h"

namespace hora {
namespace {

// Each member's entry of the exchange: 1 (its side is ready) or 0, then its
// token, NUL-terminated.
constexpr size_t kEntryBytes = 512;
constexpr size_t kSegmentBytes = 64 << 10;  // (the exchange's are far smaller)

// The members' entries, `mine` among them; "" for a member that failed.
Result<std::vector<std::string>> Exchange(Comm& comm, const std::string* mine) {
  const auto n = static_cast<size_t>(comm.size());
  std::vector<char> in(kEntryBytes, 0);
  std::vector<char> out(kEntryBytes * n, 0);
  if (mine != nullptr) {  // (it fits: the caller checked)
    in[0] = 1;
    std::memcpy(in.data() + 1, mine->data(), mine->size());
  }
  const std::vector<size_t> bytes(n, kEntryBytes);
  HORA_RETURN_IF_ERROR(AllgatherRing(comm, in.data(), out.data(), bytes));
  std::vector<std::string> entries(n);
  for (size_t k = 0; k < n; ++k) {
    const char* e = out.data() + k * kEntryBytes;
    if (e[0] == 1) entries[k].assign(e + 1, strnlen(e + 1, kEntryBytes - 1));
  }
  return entries;
}

// The members that reported a failure, as the job numbers them ("ranks 2, 5").
std::string Failed(const std::vector<std::string>& entries, std::span<const int> ranks) {
  std::string list;
  int count = 0;
  for (size_t k = 0; k < entries.size(); ++k) {
    if (!entries[k].empty()) continue;
    list += (list.empty() ? "" : ", ") + std::to_string(ranks[k]);
    ++count;
  }
  return (count == 1 ? "rank " : "ranks ") + list;
}

}  // namespace

Result<std::unique_ptr<GroupWindows>> OpenProcessSetWindows(Transport& transport, Transport& view,
                                                            std::span<const int> ranks,
                                                            uint64_t key, uint32_t context,
                                                            const WaitPolicy& waits,
                                                            const Logger* logger) {
  auto warn = [&](const std::string& m) {
    if (logger != nullptr) logger->Warning(m);
  };
  const std::string what = "process set " + std::to_string(key) + "'s shared-memory windows";
  Result<std::unique_ptr<PendingGroupWindows>> pending = transport.PrepareGroupWindows(ranks, key);
  if (pending.ok() && *pending == nullptr) return std::unique_ptr<GroupWindows>();
  if (!pending.ok()) warn("cannot make " + what + ": " + pending.status().ToString());
  Comm comm(view, waits, kSegmentBytes, context);
  comm.SetRankNumbers(std::vector<int>(ranks.begin(), ranks.end()));
  const std::string token = pending.ok() ? (*pending)->token() : std::string();
  const bool fits = token.size() + 2 <= kEntryBytes;
  if (pending.ok() && !fits) warn("cannot offer " + what + ": its name is too long: " + token);
  HORA_ASSIGN_OR_RETURN(std::vector<std::string> tokens,
                        Exchange(comm, pending.ok() && fits ? &token : nullptr));
  std::unique_ptr<GroupWindows> windows;
  bool prepared = true;
  for (const std::string& t : tokens) prepared = prepared && !t.empty();
  if (prepared) {
    Result<std::unique_ptr<GroupWindows>> opened = (*pending)->Open(tokens);
    if (opened.ok()) {
      windows = std::move(*opened);
    } else {
      warn("cannot open " + what + ": " + opened.status().ToString());
    }
  }
  // Every member mapped every other's side, or the set goes without.
  const std::string yes = "opened";
  HORA_ASSIGN_OR_RETURN(std::vector<std::string> opened,
                        Exchange(comm, windows != nullptr ? &yes : nullptr));
  bool everyone = prepared;
  for (const std::string& t : opened) everyone = everyone && !t.empty();
  if (!everyone) {
    warn(what + " are not used: " + Failed(prepared ? opened : tokens, ranks) +
         " could not make or open theirs (the set's collectives take the point-to-point "
         "algorithms)");
    return std::unique_ptr<GroupWindows>();
  }
  if (Status st = windows->Seal(); !st.ok()) warn("cannot unlink " + what + ": " + st.ToString());
  return windows;
}

}  // namespace hora
