// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "store/store_protocol.h"

#include <gtest/gtest.h>

#include <random>

namespace hora {
namespace {

bool Contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

StoreRequest Req(StoreOp op, std::vector<std::string> keys) {
  StoreRequest r;
  r.op = op;
  r.keys = std::move(keys);
  return r;
}

// One valid request of every op.
std::vector<StoreRequest> SampleRequests() {
  std::vector<StoreRequest> v;
  v.push_back(Req(StoreOp::kSet, {"rank/3/addr"}));
  v.back().value = {0, 1, 2, 0, 255};
  v.push_back(Req(StoreOp::kGet, {"rank/0/addr"}));
  v.back().timeout_ms = 30000;
  v.push_back(Req(StoreOp::kAdd, {"arrived"}));
  v.back().delta = -42;
  v.push_back(Req(StoreOp::kWait, {"a", "", "c/d"}));
  v.back().timeout_ms = kStoreMaxTimeoutMs;
  v.push_back(Req(StoreOp::kWait, {}));
  v.push_back(Req(StoreOp::kDelete, {"gone"}));
  v.push_back(Req(StoreOp::kSet, {""}));  // empty key and value
  return v;
}

std::vector<Bytes> SampleMessages() {
  std::vector<Bytes> v;
  for (const auto& r : SampleRequests()) v.push_back(*EncodeStoreRequest(r));
  v.push_back(EncodeStoreResponse({StatusCode::kOk, {9, 8, 7}, ""}));
  v.push_back(EncodeStoreResponse({StatusCode::kTimeout, {}, "timed out waiting for 'x'"}));
  return v;
}

TEST(StoreProtocol, EveryRequestRoundTrips) {
  for (const StoreRequest& r : SampleRequests()) {
    Result<Bytes> bytes = EncodeStoreRequest(r);
    ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
    Result<StoreRequest> back = DecodeStoreRequestMessage(bytes->data(), bytes->size());
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    EXPECT_EQ(back->op, r.op);
    EXPECT_EQ(back->keys, r.keys);
    EXPECT_EQ(back->value, r.value);
    EXPECT_EQ(back->delta, r.delta);
    EXPECT_EQ(back->timeout_ms, r.timeout_ms);
  }
}

TEST(StoreProtocol, ResponsesRoundTrip) {
  const StoreResponse samples[] = {{StatusCode::kOk, {}, ""},
                                   {StatusCode::kOk, Bytes(100000, 3), ""},
                                   {StatusCode::kTimeout, {}, "timed out waiting for 'k'"},
                                   {StatusCode::kInvalidArgument, {}, ""}};
  for (const StoreResponse& r : samples) {
    Bytes bytes = EncodeStoreResponse(r);
    Result<StoreResponse> back = DecodeStoreResponseMessage(bytes.data(), bytes.size());
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    EXPECT_EQ(back->code, r.code);
    EXPECT_EQ(back->value, r.value);
    EXPECT_EQ(back->message, r.message);
  }
  // Requests are not responses and vice versa.
  Bytes req = *EncodeStoreRequest(SampleRequests()[0]);
  EXPECT_FALSE(DecodeStoreResponseMessage(req.data(), req.size()).ok());
  Bytes resp = EncodeStoreResponse({});
  EXPECT_FALSE(DecodeStoreRequestMessage(resp.data(), resp.size()).ok());
}

TEST(StoreProtocol, EncoderRefusesOversizedInputNamingIt) {
  Result<Bytes> long_key = EncodeStoreRequest(Req(StoreOp::kDelete, {std::string(5000, 'k')}));
  ASSERT_FALSE(long_key.ok());
  EXPECT_TRUE(Contains(long_key.status().message(), "5000 bytes")) << long_key.status().message();
  StoreRequest big = Req(StoreOp::kSet, {"blob"});
  big.value.resize(kStoreMaxValueBytes + 1);
  Result<Bytes> too_big = EncodeStoreRequest(big);
  ASSERT_FALSE(too_big.ok());
  EXPECT_TRUE(Contains(too_big.status().message(), "'blob'")) << too_big.status().message();
  EXPECT_FALSE(EncodeStoreRequest(Req(StoreOp::kWait, std::vector<std::string>(4097))).ok());
  StoreRequest negative = Req(StoreOp::kGet, {"k"});
  negative.timeout_ms = -1;
  EXPECT_FALSE(EncodeStoreRequest(negative).ok());
  EXPECT_FALSE(EncodeStoreRequest(Req(StoreOp::kGet, {"a", "b"})).ok());
}

// Writes a u32 little-endian at `offset`.
void Poke32(Bytes* b, size_t offset, uint32_t v) {
  for (int i = 0; i < 4; ++i) (*b)[offset + i] = static_cast<uint8_t>(v >> (8 * i));
}

TEST(StoreProtocol, DecoderRejectsEachKindOfDamage) {
  const Bytes set = *EncodeStoreRequest(SampleRequests()[0]);
  auto expect_bad = [](Bytes b, const std::string& fragment) {
    Result<StoreRequest> r = DecodeStoreRequestMessage(b.data(), b.size());
    ASSERT_FALSE(r.ok()) << fragment;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_TRUE(Contains(r.status().message(), fragment)) << r.status().message();
  };
  Bytes b = set;
  b[0] ^= 1;
  expect_bad(b, "bad magic");
  b = set;
  b[4] = 2;
  expect_bad(b, "version 2");
  b = set;
  b[6] = 99;
  expect_bad(b, "unknown op 99");
  b = set;
  Poke32(&b, 8, 0xffffffff);
  expect_bad(b, "limit");
  b = set;
  b.push_back(0);
  Poke32(&b, 8, static_cast<uint32_t>(b.size() - kStoreHeaderBytes));
  expect_bad(b, "trailing");
  b = set;
  Poke32(&b, kStoreHeaderBytes, 0xfffffff0);  // key length
  expect_bad(b, "limit 4096");
  b = set;
  Poke32(&b, kStoreHeaderBytes, 2000);  // key length within limits, beyond the body
  expect_bad(b, "remain");
  // A WAIT claiming more keys than its bytes can hold, and more than the limit.
  Bytes wait = *EncodeStoreRequest(Req(StoreOp::kWait, {"a"}));
  b = wait;
  Poke32(&b, kStoreHeaderBytes + 4, 1000);
  expect_bad(b, "WAIT of 1000 keys");
  b = wait;
  Poke32(&b, kStoreHeaderBytes + 4, 5000);
  expect_bad(b, "WAIT of 5000 keys");
  // A negative timeout.
  Bytes get = *EncodeStoreRequest(Req(StoreOp::kGet, {"k"}));
  b = get;
  Poke32(&b, get.size() - 4, 0x80000000u);  // the timeout's high word
  expect_bad(b, "timeout_ms");
}

TEST(StoreProtocol, ResponseDecoderRejectsUnknownStatusCodes) {
  Bytes b = EncodeStoreResponse({StatusCode::kTimeout, {}, "m"});
  Poke32(&b, kStoreHeaderBytes + 4, 0);  // code field value: OK is not an error
  EXPECT_FALSE(DecodeStoreResponseMessage(b.data(), b.size()).ok());
  Poke32(&b, kStoreHeaderBytes + 4, 1000);
  EXPECT_FALSE(DecodeStoreResponseMessage(b.data(), b.size()).ok());
}

// Decoders must answer every input with a value or InvalidArgument: no
// crash, no over-read (ASan), no allocation from an unchecked length.
void ExpectClean(const Bytes& b) {
  Result<StoreRequest> r = DecodeStoreRequestMessage(b.data(), b.size());
  if (!r.ok()) {
    ASSERT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  }
  Result<StoreResponse> s = DecodeStoreResponseMessage(b.data(), b.size());
  if (!s.ok()) {
    ASSERT_EQ(s.status().code(), StatusCode::kInvalidArgument);
  }
}

TEST(StoreProtocol, FuzzTruncatedMessagesAreRejected) {
  for (const Bytes& full : SampleMessages()) {
    for (size_t n = 0; n < full.size(); ++n) {
      Bytes cut(full.begin(), full.begin() + static_cast<ptrdiff_t>(n));
      EXPECT_FALSE(DecodeStoreRequestMessage(cut.data(), cut.size()).ok());
      EXPECT_FALSE(DecodeStoreResponseMessage(cut.data(), cut.size()).ok());
      // Same truncation but with the header's length fixed up to match.
      if (n >= kStoreHeaderBytes) {
        Poke32(&cut, 8, static_cast<uint32_t>(n - kStoreHeaderBytes));
        ExpectClean(cut);
      }
    }
  }
}

TEST(StoreProtocol, FuzzMutatedAndRandomBytesGiveCleanErrors) {
  std::mt19937_64 rng(20240611);
  const std::vector<Bytes> samples = SampleMessages();
  for (int i = 0; i < 20000; ++i) {
    Bytes b = samples[rng() % samples.size()];
    const int mutations = 1 + static_cast<int>(rng() % 4);
    for (int m = 0; m < mutations; ++m) {
      const size_t at = rng() % b.size();
      switch (rng() % 3) {
        case 0:
          b[at] = static_cast<uint8_t>(rng());
          break;
        case 1:
          if (at + 4 <= b.size()) Poke32(&b, at, static_cast<uint32_t>(rng()));
          break;
        default:
          b[at] = rng() % 2 ? 0xff : 0x00;
          break;
      }
    }
    ASSERT_NO_FATAL_FAILURE(ExpectClean(b));
  }
  for (int i = 0; i < 5000; ++i) {
    Bytes b(rng() % 64);
    for (auto& x : b) x = static_cast<uint8_t>(rng());
    if (b.size() >= kStoreHeaderBytes && i % 2 == 0) {  // a valid header, random rest
      Bytes header = samples[rng() % samples.size()];
      std::copy(header.begin(), header.begin() + 8, b.begin());
      Poke32(&b, 8, static_cast<uint32_t>(b.size() - kStoreHeaderBytes));
    }
    ASSERT_NO_FATAL_FAILURE(ExpectClean(b));
  }
}

}  // namespace
}  // namespace hora
