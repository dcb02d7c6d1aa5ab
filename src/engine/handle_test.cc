// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// Handles: copies share one completion, which the last of them frees; the
// engine renews a name's finished completion for the name's next tensor
// only once no caller holds it, and a renewed one carries nothing of the
// last tensor's (its status, its done flag).
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "engine/handle_state.h"
#include "support/thread_ranks.h"

namespace hora {
namespace {

using testing::ExpectAllOk;
using testing::TestSettings;
using testing::ThreadRanks;

constexpr auto kWait = std::chrono::seconds(60);

TEST(Handle, CopiesShareOneCompletionAndTheLastFreesIt) {
  Handle first(new Handle::State("t"));
  EXPECT_TRUE(first.state()->OnlyHolder());
  Handle copy = first;
  Handle moved = std::move(copy);
  EXPECT_EQ(copy.state(), nullptr);
  EXPECT_EQ(moved.state(), first.state());
  EXPECT_FALSE(first.state()->OnlyHolder());
  EXPECT_FALSE(first.Poll());
  moved.state()->Complete(MismatchError("shapes differ"));
  moved.state()->Complete(Status::Ok());  // (the first completion wins)
  EXPECT_TRUE(first.Poll());
  EXPECT_EQ(first.Wait(kWait).code(), StatusCode::kMismatch);
  {
    Handle assigned;
    assigned = first;
    assigned = moved;  // (the same completion: a holder each still)
    EXPECT_EQ(assigned.status().code(), StatusCode::kMismatch);
  }
  moved = Handle();
  EXPECT_TRUE(first.state()->OnlyHolder());
  // (ASan: no leak once `first` goes, no double free)
}

TEST(Handle, RenewedItCarriesNothingOfTheLastCompletion) {
  Handle h(new Handle::State("t"));
  h.state()->Complete(TimeoutError("stalled"), std::nullopt, {1, 2});
  ASSERT_TRUE(h.Finished());
  h.state()->Renew();
  EXPECT_FALSE(h.Finished());
  EXPECT_FALSE(h.Poll());
  EXPECT_EQ(h.status().code(), StatusCode::kUnavailable);  // "not done yet"
  EXPECT_EQ(h.Wait(std::chrono::milliseconds(1)).code(), StatusCode::kTimeout);
  h.state()->Complete(Status::Ok());
  EXPECT_TRUE(h.Wait(kWait).ok());
  ASSERT_NE(h.received_splits(), nullptr);
  EXPECT_TRUE(h.received_splits()->empty());
}

// A name's completion is used again for the name's next tensor once no
// caller holds it: while a caller keeps the last handle, the next tensor
// gets another, and that kept handle still says what it said. Two are kept
// per name, so a caller that holds each handle until it has the next one's
// still allocates none. A tensor that failed leaves nothing in the
// completion its name's next tensor gets.
TEST(Engine, ANamesCompletionIsUsedAgainOnlyOnceNoCallerHoldsIt) {
  ThreadRanks ranks(2, TestSettings());
  ExpectAllOk(ranks.Run([&](int rank, Session& s) -> Status {
    std::vector<float> x(5);
    auto submit = [&](int step, size_t count) {
      for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(rank + step + i);
      TensorView v = TensorView::Flat(x.data(), DataType::kFloat32, count);
      return s.AllreduceAsync("w", v, v);
    };
    auto check = [&](int step) -> Status {
      for (size_t i = 0; i < 4; ++i) {  // (rank 0's + rank 1's)
        const float want = static_cast<float>(1 + 2 * (step + static_cast<int>(i)));
        if (x[i] != want) {
          return InternalError("step " + std::to_string(step) + ": element " + std::to_string(i) +
                               " is " + std::to_string(x[i]) + ", expected " +
                               std::to_string(want));
        }
      }
      return Status::Ok();
    };
    Handle h0 = submit(0, 4);
    HORA_RETURN_IF_ERROR(h0.Wait(kWait));
    HORA_RETURN_IF_ERROR(check(0));
    const Handle::State* s0 = h0.state();
    Handle h1 = submit(1, 4);  // (h0 held: another completion)
    if (h1.state() == s0) return InternalError("a held completion was used again");
    HORA_RETURN_IF_ERROR(h1.Wait(kWait));
    HORA_RETURN_IF_ERROR(check(1));
    if (!h0.Finished() || !h0.status().ok())
      return InternalError("h0 changed: " + h0.status().ToString());
    h0 = Handle();
    Handle h2 = submit(2, 4);  // (h1 held, h0's free: that one)
    if (h2.state() != s0) return InternalError("the free completion was not used again");
    HORA_RETURN_IF_ERROR(h2.Wait(kWait));
    HORA_RETURN_IF_ERROR(check(2));
    h1 = Handle();
    h2 = Handle();
    // Shapes that differ between the ranks: the tensor fails on both.
    Handle failed = submit(3, rank == 0 ? 4 : 5);
    const Status st = failed.Wait(kWait);
    if (st.code() != StatusCode::kMismatch) return InternalError("step 3: " + st.ToString());
    failed = Handle();
    Handle after = submit(4, 4);
    HORA_RETURN_IF_ERROR(after.Wait(kWait));
    HORA_RETURN_IF_ERROR(check(4));
    return Status::Ok();
  }));
}

}  // namespace
}  // namespace hora
