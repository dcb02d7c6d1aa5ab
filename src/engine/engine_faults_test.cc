// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// The engine when a rank misbehaves, ranks as threads: a call the others
// could not decode is refused at the call, and the job goes on; a rank that
// shuts its Session down early is named on every other rank.
#include <gtest/gtest.h>

#include <string>
#include <thread>

#include "engine/messages.h"
#include "support/thread_ranks.h"

namespace hora {
namespace {

using testing::ExpectAllOk;
using testing::TestSettings;
using testing::ThreadRanks;

constexpr auto kWait = std::chrono::seconds(60);

// A name longer than the engine's messages carry (64 KiB) once made every
// rank's engine fail ("entry 0 is truncated or malformed"): now the call
// fails at once on the rank that made it, naming the limit, and the job's
// next collectives run.
TEST(EngineFaults, ANameTooLongIsRefusedAtTheCallAndTheJobGoesOn) {
  ThreadRanks ranks(2, TestSettings());
  const std::string huge(kMaxNameBytes + 1, 'n');
  auto st = ranks.Run([&](int rank, Session& s) -> Status {
    float x = static_cast<float>(rank + 1);
    TensorView v = TensorView::Flat(&x, DataType::kFloat32, 1);
    if (rank == 0) {
      Status refused = s.AllreduceAsync(huge, v, v).Wait(kWait);
      if (refused.code() != StatusCode::kInvalidArgument ||
          refused.message().find("rank 0: allreduce 'nnnn") == std::string::npos ||
          refused.message().find("its name is 65537 bytes long; names are at most 65536 bytes") ==
              std::string::npos) {
        return InternalError("huge name: " + refused.ToString());
      }
      std::vector<TensorView> members = {v};
      std::vector<Handle> group = s.GroupedAllreduceAsync(huge, members, members);
      Status g = group.empty() ? InternalError("no handles") : group[0].Wait(kWait);
      if (g.code() != StatusCode::kInvalidArgument ||
          g.message().find("bytes long; names are at most 65536 bytes") == std::string::npos) {
        return InternalError("huge group name: " + g.ToString());
      }
    }
    HORA_RETURN_IF_ERROR(s.AllreduceAsync("after", v, v).Wait(kWait));
    if (x != 3.0f) return InternalError("after: " + std::to_string(x));
    return Status::Ok();
  });
  ExpectAllOk(st);
}

// Rank 1 closes its Session while ranks 0 and 2 wait in an allreduce: they
// fail at once, and the error says which rank shut down.
TEST(EngineFaults, ARankThatShutsDownEarlyIsNamed) {
  auto world = ThreadWorld::Create(3);
  std::vector<Status> results(3);
  std::vector<std::thread> threads;
  for (int r = 0; r < 3; ++r) {
    threads.emplace_back([&, r] {
      SessionOptions opts;
      opts.rank = r;
      opts.world = world;
      opts.settings = TestSettings();
      opts.read_environment = false;
      auto s = Session::Create(opts);
      if (!s.ok()) {
        results[static_cast<size_t>(r)] = s.status();
        return;
      }
      if (r == 1) return;  // its Session goes now
      float x = 1.0f;
      TensorView v = TensorView::Flat(&x, DataType::kFloat32, 1);
      Status st = (*s)->AllreduceAsync("w", v, v).Wait(kWait);
      results[static_cast<size_t>(r)] =
          st.code() == StatusCode::kAborted &&
                  st.message().find("rank 1 shut its Session down") != std::string::npos
              ? Status::Ok()
              : InternalError("rank " + std::to_string(r) + ": " + st.ToString());
    });
  }
  for (auto& t : threads) t.join();
  ExpectAllOk(results);
}

}  // namespace
}  // namespace hora
