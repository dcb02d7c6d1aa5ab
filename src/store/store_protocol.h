// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// The binary wire format of TCP store requests and responses (design §5).
//
// Every message is a 12-byte header followed by a body:
//   u32 magic "HRST" (0x54535248) | u16 version = 1 | u16 op | u32 body_length
// The body is a sequence of fields, each `u32 length | bytes`. Integers are
// little-endian; an integer field is exactly 8 bytes (4 for counts and codes).
//
//   op           body fields
//   SET     (1)  key, value
//   GET     (2)  key, timeout_ms (i64)
//   ADD     (3)  key, delta (i64)
//   WAIT    (4)  count (u32), count x key, timeout_ms (i64)
//   DELETE  (5)  key
//   OK     (16)  value: GET -> the value, ADD -> the new counter (i64),
//                DELETE -> 1 byte (1 = existed), SET and WAIT -> empty
//   ERROR  (17)  code (u32, a non-OK StatusCode), message
//
// Decoders check every length and count against the bytes that remain and
// against the limits below before using or allocating anything, reject
// trailing bytes, and return InvalidArgument naming what was wrong. They never
// crash on any input (fuzz-tested). Encoders refuse values over the limits
// with InvalidArgument naming the key and the size, so a peer never receives
// a message it would reject.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "hora/status.h"
#include "store/store.h"

namespace hora {

inline constexpr uint32_t kStoreMagic = 0x54535248;  // "HRST" on the wire
inline constexpr uint16_t kStoreProtocolVersion = 1;
inline constexpr size_t kStoreHeaderBytes = 12;

inline constexpr size_t kStoreMaxKeyBytes = 4 * 1024;
inline constexpr size_t kStoreMaxValueBytes = 64 * 1024 * 1024;
inline constexpr size_t kStoreMaxWaitKeys = 4096;
inline constexpr size_t kStoreMaxMessageBytes = 64 * 1024;             // error messages
inline constexpr int64_t kStoreMaxTimeoutMs = 7LL * 24 * 3600 * 1000;  // one week
// The largest body any valid message has (a SET of the largest key and value).
inline constexpr size_t kStoreMaxBodyBytes = kStoreMaxValueBytes + kStoreMaxKeyBytes + 64;

enum class StoreOp : uint16_t {
  kSet = 1,
  kGet = 2,
  kAdd = 3,
  kWait = 4,
  kDelete = 5,
  kOk = 16,
  kError = 17,
};

// "SET", "GET", ..., or "op 42".
std::string StoreOpName(uint16_t op);

struct StoreRequest {
  StoreOp op = StoreOp::kGet;
  std::vector<std::string> keys;  // exactly one, except WAIT (0..kStoreMaxWaitKeys)
  Bytes value;                    // SET
  int64_t delta = 0;              // ADD
  int64_t timeout_ms = 0;         // GET, WAIT: 0..kStoreMaxTimeoutMs
};

struct StoreResponse {
  StatusCode code = StatusCode::kOk;  // kOk -> OK message, otherwise ERROR
  Bytes value;                        // OK
  std::string message;                // ERROR (truncated to kStoreMaxMessageBytes on encode)
};

struct StoreHeader {
  StoreOp op;
  uint32_t body_length;  // <= kStoreMaxBodyBytes
};

// Decodes the header at `data` (needs kStoreHeaderBytes). Rejects a bad magic,
// another version, an unknown op and a body over kStoreMaxBodyBytes.
Result<StoreHeader> DecodeStoreHeader(const uint8_t* data, size_t n);

// Whole messages (header + body).
Result<Bytes> EncodeStoreRequest(const StoreRequest& request);
Bytes EncodeStoreResponse(const StoreResponse& response);

// Decode a body whose header was decoded already.
Result<StoreRequest> DecodeStoreRequest(const StoreHeader& header, const uint8_t* body, size_t n);
Result<StoreResponse> DecodeStoreResponse(const StoreHeader& header, const uint8_t* body, size_t n);

// Decode one whole message that must fill `data` exactly.
Result<StoreRequest> DecodeStoreRequestMessage(const uint8_t* data, size_t n);
Result<StoreResponse> DecodeStoreResponseMessage(const uint8_t* data, size_t n);

}  // namespace hora
