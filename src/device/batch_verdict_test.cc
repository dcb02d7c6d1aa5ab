// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "device/batch_verdict.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <set>

#include "collectives/allreduce_common.h"
#include "kernels/reduce.h"
#include "support/stub_backend.h"

namespace hora {
namespace {

// The other ranks' bytes, as the allreduce would bring them (each rank's
// slot is its own): this rank's view of the verdict, one thread.
class OthersSaid final : public testing::StubBackend {
 public:
  explicit OthersSaid(std::vector<BatchPart> said) : said_(std::move(said)) {}
  Status Allreduce(const AllreduceArgs& a) override {
    ++calls;
    if (fail) return UnavailableError("the transport is gone");
    EXPECT_EQ(a.dtype, DataType::kUInt8);
    EXPECT_EQ(a.reduction.op, ReduceOp::kMax);
    EXPECT_EQ(a.count, said_.size());
    auto* out = static_cast<uint8_t*>(a.out);
    const auto* in = static_cast<const uint8_t*>(a.in);
    for (size_t i = 0; i < a.count; ++i) {
      out[i] = std::max(in[i], static_cast<uint8_t>(said_[i]));
    }
    return Status::Ok();
  }
  int calls = 0;
  bool fail = false;

 private:
  std::vector<BatchPart> said_;  // (this rank's own slot: kWhole, it says its own)
};

RequestMeta Meta(OpType op, int root = 0) {
  RequestMeta m;
  m.name = "grads";
  m.op = op;
  m.root = root;
  return m;
}

constexpr BatchPart W = BatchPart::kWhole;
constexpr BatchPart S = BatchPart::kPlaceholders;
constexpr BatchPart L = BatchPart::kLeftNccl;
constexpr BatchPart C = BatchPart::kCannot;

TEST(BatchVerdict, EveryRankWholeIsOk) {
  OthersSaid data({W, W, W, W});
  std::vector<uint8_t> scratch;
  const BatchVerdict v = AgreeOnBatch(data, Meta(OpType::kAllreduce), 0, 4, W, scratch);
  EXPECT_EQ(data.calls, 1);
  EXPECT_TRUE(v.status().ok()) << v.status().ToString();
  EXPECT_FALSE(v.left_nccl);
}

TEST(BatchVerdict, ARankThatGavePlaceholdersIsNamedToTheOthers) {
  OthersSaid data({W, W, S, W});
  std::vector<uint8_t> scratch;
  const BatchVerdict v = AgreeOnBatch(data, Meta(OpType::kAllreduce), 0, 4, W, scratch);
  EXPECT_TRUE(v.ran.ok());
  EXPECT_EQ(v.named.code(), StatusCode::kAborted);
  EXPECT_NE(v.named.message().find("rank 2 could not give its data to this allreduce"),
            std::string::npos)
      << v.named.ToString();
  EXPECT_FALSE(v.left_nccl);
}

TEST(BatchVerdict, SeveralAreNamedTogether) {
  OthersSaid data({W, S, W, S});
  std::vector<uint8_t> scratch;
  const BatchVerdict v = AgreeOnBatch(data, Meta(OpType::kAllgather), 2, 4, W, scratch);
  EXPECT_NE(v.named.message().find("ranks 1, 3 could not give their data to this allgather"),
            std::string::npos)
      << v.named.ToString();
}

TEST(BatchVerdict, ARanksOwnFailureIsLeftToItsOwnError) {
  OthersSaid data({W, W, W});
  std::vector<uint8_t> scratch;
  const BatchVerdict v = AgreeOnBatch(data, Meta(OpType::kAllreduce), 1, 3, S, scratch);
  EXPECT_TRUE(v.status().ok()) << v.status().ToString();
  EXPECT_EQ(scratch[1], static_cast<uint8_t>(S)) << "what this rank gave went in its own slot";
}

TEST(BatchVerdict, ABroadcastHearsOnlyItsRoot) {
  std::vector<uint8_t> scratch;
  OthersSaid receiver_failed({W, W, S});
  EXPECT_TRUE(
      AgreeOnBatch(receiver_failed, Meta(OpType::kBroadcast, 1), 0, 3, W, scratch).status().ok());
  OthersSaid root_failed({W, S, W});
  const BatchVerdict v = AgreeOnBatch(root_failed, Meta(OpType::kBroadcast, 1), 0, 3, W, scratch);
  EXPECT_NE(v.named.message().find("root rank 1 could not give its data to this broadcast"),
            std::string::npos)
      << v.named.ToString();
}

TEST(BatchVerdict, BeforeNcclsCallsEveryRanksFailureFailsEveryRank) {
  // (No rank makes the calls: a broadcast's receivers wait for each other.)
  OthersSaid data({W, W, C});
  std::vector<uint8_t> scratch;
  const BatchVerdict v = AgreeOnBatch(data, Meta(OpType::kBroadcast, 0), 1, 3, W, scratch, true);
  EXPECT_FALSE(v.left_nccl);
  EXPECT_NE(v.named.message().find("rank 2 could not take part in this broadcast (its error says "
                                   "why), so no rank made it through NCCL"),
            std::string::npos)
      << v.named.ToString();
}

TEST(BatchVerdict, AnAbortedCommunicatorMakesEveryRankStartAnew) {
  OthersSaid data({W, L, W});
  std::vector<uint8_t> scratch;
  const BatchVerdict v = AgreeOnBatch(data, Meta(OpType::kBroadcast, 0), 2, 3, W, scratch, true);
  EXPECT_TRUE(v.left_nccl);
  EXPECT_NE(v.named.message().find("rank 1 could not take part in this broadcast (its NCCL "
                                   "communicator was aborted"),
            std::string::npos)
      << v.named.ToString();
  EXPECT_NE(v.named.message().find("made anew"), std::string::npos) << v.named.ToString();
  // The rank whose communicator it was: its own error says it; it starts anew too.
  OthersSaid mine({W, W, W});
  const BatchVerdict w = AgreeOnBatch(mine, Meta(OpType::kAllreduce), 1, 3, L, scratch, true);
  EXPECT_TRUE(w.left_nccl);
  EXPECT_TRUE(w.named.ok()) << w.named.ToString();
}

TEST(BatchVerdict, ATransportFailureIsTheAllreducesOwn) {
  OthersSaid data({W, S});
  data.fail = true;
  std::vector<uint8_t> scratch;
  const BatchVerdict v = AgreeOnBatch(data, Meta(OpType::kAllreduce), 0, 2, W, scratch);
  EXPECT_EQ(v.ran.code(), StatusCode::kUnavailable);
  EXPECT_NE(v.ran.message().find("telling the ranks what each gave this batch"), std::string::npos);
  EXPECT_EQ(v.status().code(), StatusCode::kUnavailable);
}

TEST(BatchVerdict, OneRankAgreesWithNobody) {
  OthersSaid data({S});
  std::vector<uint8_t> scratch;
  EXPECT_TRUE(AgreeOnBatch(data, Meta(OpType::kAllreduce), 0, 1, S, scratch).status().ok());
  EXPECT_EQ(data.calls, 0);
}

// The trailer through the batch's own reduction, as the CPU collectives
// make it (kernels: Reduce over the ranks in order, then Finalize), for
// every dtype and op, 2-5 ranks, and failed ranks none, one, first and last.
TEST(BatchVerdict, ATrailerNamesTheFailedRanksThroughEveryReduction) {
  const ReduceOp ops[] = {ReduceOp::kSum, ReduceOp::kAverage, ReduceOp::kMin, ReduceOp::kMax,
                          ReduceOp::kProduct};
  int carried = 0;
  for (const DataType dtype : kAllDataTypes) {
    for (const ReduceOp op : ops) {
      for (int n = 2; n <= 5; ++n) {
        RequestMeta m = Meta(OpType::kAllreduce);
        m.dtype = dtype;
        m.reduction.op = op;
        const size_t bytes = TrailerBytes(m, n);
        const bool floating = dtype == DataType::kFloat16 || dtype == DataType::kBFloat16 ||
                              dtype == DataType::kFloat32 || dtype == DataType::kFloat64;
        if (op == ReduceOp::kAverage && !floating) {
          EXPECT_EQ(bytes, 0u) << "an integer average would lose a flag";
          continue;
        }
        ASSERT_EQ(bytes, static_cast<size_t>(n) * DataTypeSize(dtype));
        ++carried;
        for (const std::set<int>& failed :
             {std::set<int>{}, std::set<int>{1}, std::set<int>{0, n - 1}}) {
          std::vector<std::vector<std::byte>> t(static_cast<size_t>(n),
                                                std::vector<std::byte>(bytes));
          for (int r = 0; r < n; ++r) {
            PutTrailer(m, r, n, failed.count(r) ? S : W, t[static_cast<size_t>(r)].data());
          }
          std::vector<std::byte> sum = t[0];
          for (int r = 1; r < n; ++r) {
            kernels::Reduce(dtype, ReducingOp(op), sum.data(), t[static_cast<size_t>(r)].data(),
                            static_cast<size_t>(n));
          }
          kernels::Finalize(dtype, op, n, 1.0, sum.data(), static_cast<size_t>(n));
          for (int r = 0; r < n; ++r) {
            const BatchVerdict v = ReadTrailer(m, r, n, sum.data());
            std::set<int> others = failed;
            others.erase(r);
            SCOPED_TRACE(std::string(DataTypeName(dtype)) + " op " +
                         std::to_string(static_cast<int>(op)) + ", " + std::to_string(n) +
                         " ranks, rank " + std::to_string(r));
            if (others.empty()) {
              EXPECT_TRUE(v.named.ok()) << v.named.ToString();
              continue;
            }
            ASSERT_FALSE(v.named.ok());
            for (int f : others) {
              EXPECT_NE(v.named.message().find(std::to_string(f)), std::string::npos)
                  << v.named.ToString();
            }
          }
        }
      }
    }
  }
  EXPECT_GT(carried, 0);
}

TEST(BatchVerdict, ScaledReductionsAndOtherCollectivesAgreeApart) {
  RequestMeta m = Meta(OpType::kAllreduce);
  m.reduction.prescale_factor = 0.5;
  EXPECT_EQ(TrailerBytes(m, 4), 0u);
  m.reduction = {ReduceOp::kSum, 1.0, 2.0};
  EXPECT_EQ(TrailerBytes(m, 4), 0u);
  m.reduction = {ReduceOp::kAdasum, 1.0, 1.0};
  EXPECT_EQ(TrailerBytes(m, 4), 0u);
  EXPECT_EQ(TrailerBytes(Meta(OpType::kAllgather), 4), 0u);
  EXPECT_EQ(TrailerBytes(Meta(OpType::kAllreduce), 1), 0u) << "one rank: nobody to tell";
}

TEST(BatchVerdict, ABroadcastsTrailerIsItsRootsFlag) {
  const RequestMeta m = Meta(OpType::kBroadcast, 2);
  ASSERT_EQ(TrailerBytes(m, 3), 1u);
  for (const BatchPart root_gave : {W, S}) {
    std::byte at{0x55};
    PutTrailer(m, 2, 3, root_gave, &at);  // (what the broadcast brings every rank)
    const BatchVerdict v = ReadTrailer(m, 0, 3, &at);
    EXPECT_EQ(v.named.ok(), root_gave == W) << v.named.ToString();
    if (root_gave == S) {
      EXPECT_NE(v.named.message().find("root rank 2 could not give its data to this broadcast"),
                std::string::npos);
    }
  }
}

}  // namespace
}  // namespace hora
