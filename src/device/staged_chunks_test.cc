// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "device/staged_chunks.h"

#include <gtest/gtest.h>

#include <cstring>

#include "support/stub_backend.h"

namespace hora {
namespace {

// Records the calls; where `failed_rank` is set, the verdict it carries says
// that rank gave placeholders (as the other ranks' data would have made it).
class Recorder final : public testing::StubBackend {
 public:
  struct Call {
    size_t count;
    DataType dtype;
    ReduceOp op;
  };
  explicit Recorder(int size) : size_(size) {}
  Status Allreduce(const AllreduceArgs& a) override {
    calls.push_back({a.count, a.dtype, a.reduction.op});
    if (failed_rank < 0) return Status::Ok();
    if (a.dtype == DataType::kUInt8) {  // (AgreeOnBatch's)
      static_cast<uint8_t*>(a.out)[failed_rank] = 1;
    } else if (a.count >= static_cast<size_t>(size_) && a.dtype == DataType::kFloat32) {
      const float one = 1.0f;  // (sum: a flagged slot is nonzero)
      std::memcpy(static_cast<float*>(a.out) +
                      (a.count - static_cast<size_t>(size_) + static_cast<size_t>(failed_rank)),
                  &one, 4);
    }
    return Status::Ok();
  }
  Status Broadcast(void*, size_t bytes, int) override {
    broadcast_bytes.push_back(bytes);
    return Status::Ok();
  }
  std::vector<Call> calls;
  std::vector<size_t> broadcast_bytes;
  int failed_rank = -1;

 private:
  const int size_;
};

RequestMeta Allreduce(Reduction r) {
  RequestMeta m;
  m.name = "grads";
  m.op = OpType::kAllreduce;
  m.dtype = DataType::kFloat32;
  m.reduction = r;
  return m;
}

// 3 chunks of 100 floats (the last 40), on 4 ranks, from rank 0.
struct ChunkedRun {
  explicit ChunkedRun(const RequestMeta& m, int failed_rank = -1) : data(4) {
    data.failed_rank = failed_rank;
    buffer.assign(1000 + TrailerBytes(m, 4), std::byte{0});
    std::vector<size_t> after;
    status = RunInChunks(data, m, 960, 400,
                         {[&](size_t offset, size_t) { return buffer.data() + offset; },
                          [&](size_t offset, size_t) {
                            after.push_back(offset);
                            told_before_last_after = !told.named.ok();
                          }},
                         {0, 4, [] { return BatchPart::kWhole; }, &told});
    afters = after.size();
  }
  Recorder data;
  std::vector<std::byte> buffer;
  BatchVerdict told;
  Status status;
  size_t afters = 0;
  bool told_before_last_after = false;
};

TEST(StagedChunks, TheLastChunkCarriesTheVerdict) {
  const ChunkedRun run(Allreduce({}));
  ASSERT_TRUE(run.status.ok()) << run.status.ToString();
  ASSERT_EQ(run.data.calls.size(), 3u) << "no allreduce besides the chunks'";
  EXPECT_EQ(run.data.calls[0].count, 100u);
  EXPECT_EQ(run.data.calls[1].count, 100u);
  EXPECT_EQ(run.data.calls[2].count, 40u + 4u) << "the last chunk and one flag per rank";
  EXPECT_EQ(run.afters, 3u);
  EXPECT_TRUE(run.told.status().ok());
}

TEST(StagedChunks, AFlagInTheTrailerIsToldBeforeTheLastChunkGoesBack) {
  const ChunkedRun run(Allreduce({}), 2);
  ASSERT_TRUE(run.status.ok());
  EXPECT_EQ(run.data.calls.size(), 3u);
  EXPECT_NE(run.told.named.message().find("rank 2 could not give its data to this allreduce"),
            std::string::npos)
      << run.told.named.ToString();
  EXPECT_TRUE(run.told_before_last_after);
}

TEST(StagedChunks, AScaledReductionIsToldByAnAllreduceOfItsOwn) {
  const ChunkedRun run(Allreduce({ReduceOp::kSum, 0.5, 1.0}), 3);
  ASSERT_TRUE(run.status.ok());
  ASSERT_EQ(run.data.calls.size(), 4u);
  EXPECT_EQ(run.data.calls[2].count, 40u) << "no trailer";
  EXPECT_EQ(run.data.calls[3].dtype, DataType::kUInt8);
  EXPECT_EQ(run.data.calls[3].op, ReduceOp::kMax);
  EXPECT_EQ(run.data.calls[3].count, 4u);
  EXPECT_NE(run.told.named.message().find("rank 3 could not give its data"), std::string::npos)
      << run.told.named.ToString();
  EXPECT_TRUE(run.told_before_last_after);
}

TEST(StagedChunks, ABroadcastCarriesItsRootsFlag) {
  RequestMeta m = Allreduce({});
  m.op = OpType::kBroadcast;
  m.root = 1;
  const ChunkedRun run(m);
  ASSERT_TRUE(run.status.ok());
  EXPECT_EQ(run.data.broadcast_bytes, (std::vector<size_t>{400, 400, 160 + 1}));
}

TEST(StagedChunks, WithoutAVerdictNothingIsAdded) {
  Recorder data(4);
  std::vector<std::byte> buffer(960);
  ASSERT_TRUE(RunInChunks(data, Allreduce({}), 960, 400,
                          {[&](size_t offset, size_t) { return buffer.data() + offset; },
                           [](size_t, size_t) {}},
                          {})
                  .ok());
  ASSERT_EQ(data.calls.size(), 3u);
  EXPECT_EQ(data.calls[2].count, 40u);
}

}  // namespace
}  // namespace hora
