// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "engine/messages.h"

#include <gtest/gtest.h>

#include <random>
#include <type_traits>

namespace hora {
namespace {

// The codec's results as values (the engine's own calls fill given lists).
std::vector<uint8_t> Encoded(const std::vector<RequestMeta>& list) {
  std::vector<uint8_t> bytes;
  EncodeRequests(list, &bytes);
  return bytes;
}
std::vector<uint8_t> Encoded(const std::vector<Response>& list) {
  std::vector<uint8_t> bytes;
  EncodeResponses(list, &bytes);
  return bytes;
}
template <typename T>
Result<std::vector<T>> Decoded(const uint8_t* data, size_t size) {
  std::vector<T> list;
  if constexpr (std::is_same_v<T, Response>) {
    HORA_RETURN_IF_ERROR(DecodeResponses(data, size, &list));
  } else {
    HORA_RETURN_IF_ERROR(DecodeRequests(data, size, &list));
  }
  return list;
}

RequestMeta Sample(int i) {
  RequestMeta m;
  m.name = "layer" + std::to_string(i) + ".weight";
  m.op = i % 2 ? OpType::kBroadcast : OpType::kAllreduce;
  m.dtype = DataType::kBFloat16;
  m.shape = {3, i, 7};
  m.reduction = {ReduceOp::kAverage, 0.5, 2.0};
  m.root = i % 3;
  m.cacheable = i % 4 != 0;
  return m;
}

TEST(EngineMessages, RoundTrip) {
  RequestMeta gpu = Sample(4);
  gpu.device = DeviceType::kCUDA;
  std::vector<RequestMeta> reqs = {Sample(1), Sample(2), gpu, Sample(8)};
  auto enc = Encoded(reqs);
  auto dec = Decoded<RequestMeta>(enc.data(), enc.size());
  ASSERT_TRUE(dec.ok()) << dec.status().ToString();
  ASSERT_EQ(dec->size(), 4u);
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ((*dec)[i].name, reqs[i].name);
    EXPECT_TRUE((*dec)[i].SameParams(reqs[i]));
    EXPECT_EQ((*dec)[i].cacheable, reqs[i].cacheable);
    EXPECT_EQ((*dec)[i].device, reqs[i].device);
  }
  // A GPU tensor and the same on the host do not agree, and say so.
  RequestMeta host = gpu;
  host.device = DeviceType::kCPU;
  EXPECT_FALSE(host.SameParams(gpu));
  EXPECT_NE(gpu.DescribeParams().find(" on cuda"), std::string::npos) << gpu.DescribeParams();
  EXPECT_EQ(host.DescribeParams().find(" on cuda"), std::string::npos) << host.DescribeParams();
  RequestMeta a2a = Sample(6);
  a2a.op = OpType::kAlltoall;
  a2a.splits = {2, 0, 5};
  std::vector<Response> resp = {
      {Sample(3), "", {}}, {Sample(4), "ranks disagree: ...", {}}, {a2a, "", {2, 0, 5, 1, 1, 1}}};
  auto renc = Encoded(resp);
  auto rdec = Decoded<Response>(renc.data(), renc.size());
  ASSERT_TRUE(rdec.ok()) << rdec.status().ToString();
  EXPECT_EQ((*rdec)[1].error, "ranks disagree: ...");
  EXPECT_EQ((*rdec)[0].params.name, "layer3.weight");
  EXPECT_EQ((*rdec)[2].params.splits, (std::vector<int64_t>{2, 0, 5}));
  EXPECT_EQ((*rdec)[2].rows, (std::vector<int64_t>{2, 0, 5, 1, 1, 1}));
}

// The engine decodes every cycle into the same lists: whatever an element
// held before (longer names, groups, splits, errors, rows), the decoded list
// equals a fresh decode.
TEST(EngineMessages, DecodingIntoAUsedListGivesAFreshDecode) {
  auto same_request = [](const RequestMeta& a, const RequestMeta& b) {
    return a.name == b.name && a.SameParams(b) && a.cacheable == b.cacheable &&
           a.splits == b.splits && a.shape == b.shape && a.root == b.root;
  };
  RequestMeta big = Sample(7);
  big.name = std::string(300, 'x');
  big.group = "a group";
  big.group_size = 2;
  big.op = OpType::kAlltoall;
  big.splits = {4, 5, 6, 7};
  big.shape = {1, 2, 3, 4, 5};
  big.dtype = DataType::kInt8;
  big.device = DeviceType::kCUDA;
  big.reduction = {ReduceOp::kMax, 3.0, 4.0};
  big.root = 2;
  big.cacheable = false;
  const std::vector<RequestMeta> before = {big, big, big, Sample(9)};
  const std::vector<RequestMeta> now = {Sample(1), Sample(2)};
  std::vector<uint8_t> bytes;
  EncodeRequests(before, &bytes);
  std::vector<RequestMeta> list;
  ASSERT_TRUE(DecodeRequests(bytes.data(), bytes.size(), &list).ok());
  ASSERT_EQ(list.size(), 4u);
  EncodeRequests(now, &bytes);  // (the same buffer, shorter now)
  EXPECT_EQ(bytes, Encoded(now));
  ASSERT_TRUE(DecodeRequests(bytes.data(), bytes.size(), &list).ok());
  ASSERT_EQ(list.size(), 2u);
  for (size_t i = 0; i < 2; ++i) EXPECT_TRUE(same_request(list[i], now[i])) << i;
  EXPECT_EQ(Encoded(list), bytes);  // every field on the wire

  std::vector<Response> responses = {{big, "an error", {1, 2, 3}}, {big, "", {9}}};
  EncodeResponses(responses, &bytes);
  std::vector<Response> decided;
  ASSERT_TRUE(DecodeResponses(bytes.data(), bytes.size(), &decided).ok());
  const std::vector<Response> next = {
      {Sample(3), "", {}}, {Sample(4), "", {}}, {Sample(5), "", {}}};
  EncodeResponses(next, &bytes);
  EXPECT_EQ(bytes, Encoded(next));
  ASSERT_TRUE(DecodeResponses(bytes.data(), bytes.size(), &decided).ok());
  ASSERT_EQ(decided.size(), 3u);
  EXPECT_EQ(Encoded(decided), bytes);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_TRUE(same_request(decided[i].params, next[i].params)) << i;
    EXPECT_EQ(decided[i].error, "") << i;
    EXPECT_TRUE(decided[i].rows.empty()) << i;
    EXPECT_TRUE(decided[i].params.group.empty()) << i;
  }
  // A malformed list is an error, into a used list too.
  ASSERT_GT(bytes.size(), 3u);
  bytes.erase(bytes.end() - 3, bytes.end());
  EXPECT_FALSE(DecodeResponses(bytes.data(), bytes.size(), &decided).ok());
}

TEST(EngineMessages, CachedDecisionMatchesOnlyThisRanksRows) {
  RequestMeta ag = Sample(2);
  ag.op = OpType::kAllgather;
  Response r{ag, "", {3, 1}};  // rank 0 gave 3 rows, rank 1 one row
  RequestMeta mine = ag;
  mine.shape[0] = 1;
  EXPECT_TRUE(r.Matches(mine, 1, 2));   // rank 1 still gives 1 row
  EXPECT_FALSE(r.Matches(mine, 0, 2));  // rank 0 now gives 1, not 3
  mine.shape[2] = 8;
  EXPECT_FALSE(r.Matches(mine, 1, 2));  // trailing dimensions must agree

  RequestMeta a2a = Sample(2);
  a2a.op = OpType::kAlltoall;
  a2a.splits = {1, 2};
  Response t{a2a, "", {1, 2, 0, 4}};
  EXPECT_TRUE(t.Matches(a2a, 0, 2));
  EXPECT_FALSE(t.Matches(a2a, 1, 2));
}

TEST(EngineMessages, TruncatedOrCorruptInputIsAnErrorNotACrash) {
  auto enc = Encoded(std::vector<RequestMeta>{Sample(1), Sample(5)});
  for (size_t cut = 0; cut < enc.size(); ++cut) {
    EXPECT_FALSE(Decoded<RequestMeta>(enc.data(), cut).ok()) << "cut at " << cut;
  }
  auto extra = enc;
  extra.push_back(0);
  EXPECT_NE(Decoded<RequestMeta>(extra.data(), extra.size()).status().message().find("trailing"),
            std::string::npos);
  std::mt19937 rng(7);
  for (int trial = 0; trial < 2000; ++trial) {
    auto bad = enc;
    for (int k = 0; k < 4; ++k) bad[rng() % bad.size()] = static_cast<uint8_t>(rng());
    (void)Decoded<RequestMeta>(bad.data(), bad.size());  // must not crash or over-read (ASan)
    std::vector<uint8_t> noise(rng() % 64);
    for (auto& b : noise) b = static_cast<uint8_t>(rng());
    (void)Decoded<Response>(noise.data(), noise.size());
  }
  uint8_t wrong_version[] = {9, 0, 0, 0, 0};
  EXPECT_NE(Decoded<Response>(wrong_version, 5).status().message().find("unknown version 9"),
            std::string::npos);
}

}  // namespace
}  // namespace hora
