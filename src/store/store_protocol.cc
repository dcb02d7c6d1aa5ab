// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "store/store_protocol.h"

#include <algorithm>
#include <string_view>

namespace hora {
namespace {

void PutLe(Bytes* out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out->push_back(static_cast<uint8_t>(v >> (8 * i)));
}

uint64_t GetLe(const uint8_t* p, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= uint64_t{p[i]} << (8 * i);
  return v;
}

void PutField(Bytes* out, const void* data, size_t n) {
  PutLe(out, n, 4);
  const auto* p = static_cast<const uint8_t*>(data);
  out->insert(out->end(), p, p + n);
}

void PutIntField(Bytes* out, uint64_t v, int bytes) {
  PutLe(out, static_cast<uint64_t>(bytes), 4);
  PutLe(out, v, bytes);
}

Status Malformed(const std::string& what) {
  return InvalidArgument("malformed store message: " + what);
}

// Reads fields from a body, checking each length against what remains.
class FieldReader {
 public:
  FieldReader(std::string_view op, const uint8_t* p, size_t n) : op_(op), p_(p), left_(n) {}

  // A field of at most `max` bytes.
  Status Field(const char* what, size_t max, std::string_view* out) {
    if (left_ < 4) return Malformed(op_ + " " + what + ": truncated length");
    const uint64_t len = GetLe(p_, 4);
    p_ += 4;
    left_ -= 4;
    if (len > max) {
      return Malformed(op_ + " " + what + " is " + std::to_string(len) + " bytes, limit " +
                       std::to_string(max));
    }
    if (len > left_) {
      return Malformed(op_ + " " + what + " claims " + std::to_string(len) + " bytes, " +
                       std::to_string(left_) + " remain");
    }
    *out = std::string_view(reinterpret_cast<const char*>(p_), len);
    p_ += len;
    left_ -= len;
    return Status::Ok();
  }

  Status Int(const char* what, int bytes, uint64_t* out) {
    std::string_view f;
    HORA_RETURN_IF_ERROR(Field(what, 8, &f));
    if (f.size() != static_cast<size_t>(bytes)) {
      return Malformed(op_ + " " + what + " is " + std::to_string(f.size()) + " bytes, expected " +
                       std::to_string(bytes));
    }
    *out = GetLe(reinterpret_cast<const uint8_t*>(f.data()), bytes);
    return Status::Ok();
  }

  Status Timeout(int64_t* out) {
    uint64_t v = 0;
    HORA_RETURN_IF_ERROR(Int("timeout_ms", 8, &v));
    *out = static_cast<int64_t>(v);
    if (*out < 0 || *out > kStoreMaxTimeoutMs) {
      return Malformed(op_ + " timeout_ms " + std::to_string(*out) + " is outside 0.." +
                       std::to_string(kStoreMaxTimeoutMs));
    }
    return Status::Ok();
  }

  Status Key(std::vector<std::string>* keys) {
    std::string_view k;
    HORA_RETURN_IF_ERROR(Field("key", kStoreMaxKeyBytes, &k));
    keys->emplace_back(k);
    return Status::Ok();
  }

  // Fails unless every byte was consumed.
  Status End() const {
    if (left_ != 0) return Malformed(op_ + ": " + std::to_string(left_) + " trailing bytes");
    return Status::Ok();
  }

  size_t left() const { return left_; }

 private:
  std::string op_;
  const uint8_t* p_;
  size_t left_;
};

Bytes WithHeader(StoreOp op, const Bytes& body) {
  Bytes out;
  out.reserve(kStoreHeaderBytes + body.size());
  PutLe(&out, kStoreMagic, 4);
  PutLe(&out, kStoreProtocolVersion, 2);
  PutLe(&out, static_cast<uint16_t>(op), 2);
  PutLe(&out, body.size(), 4);
  out.insert(out.end(), body.begin(), body.end());
  return out;
}

Status CheckKey(const std::string& key) {
  if (key.size() > kStoreMaxKeyBytes) {
    return InvalidArgument("store key '" + key.substr(0, 64) + "...' is " +
                           std::to_string(key.size()) + " bytes, limit " +
                           std::to_string(kStoreMaxKeyBytes));
  }
  return Status::Ok();
}

bool IsRequestOp(StoreOp op) { return op >= StoreOp::kSet && op <= StoreOp::kDelete; }

}  // namespace

std::string StoreOpName(uint16_t op) {
  switch (static_cast<StoreOp>(op)) {
    case StoreOp::kSet:
      return "SET";
    case StoreOp::kGet:
      return "GET";
    case StoreOp::kAdd:
      return "ADD";
    case StoreOp::kWait:
      return "WAIT";
    case StoreOp::kDelete:
      return "DELETE";
    case StoreOp::kOk:
      return "OK";
    case StoreOp::kError:
      return "ERROR";
  }
  return "op " + std::to_string(op);
}

Result<StoreHeader> DecodeStoreHeader(const uint8_t* data, size_t n) {
  if (n < kStoreHeaderBytes) {
    return Malformed("header needs " + std::to_string(kStoreHeaderBytes) + " bytes, got " +
                     std::to_string(n));
  }
  if (GetLe(data, 4) != kStoreMagic) return Malformed("bad magic (not a Hora store peer?)");
  const uint64_t version = GetLe(data + 4, 2);
  if (version != kStoreProtocolVersion) {
    return Malformed("protocol version " + std::to_string(version) + ", this build speaks " +
                     std::to_string(kStoreProtocolVersion));
  }
  const auto op = static_cast<uint16_t>(GetLe(data + 6, 2));
  const bool known = IsRequestOp(static_cast<StoreOp>(op)) ||
                     op == static_cast<uint16_t>(StoreOp::kOk) ||
                     op == static_cast<uint16_t>(StoreOp::kError);
  if (!known) return Malformed("unknown " + StoreOpName(op));
  const uint64_t body = GetLe(data + 8, 4);
  if (body > kStoreMaxBodyBytes) {
    return Malformed(StoreOpName(op) + " body of " + std::to_string(body) + " bytes, limit " +
                     std::to_string(kStoreMaxBodyBytes));
  }
  return StoreHeader{static_cast<StoreOp>(op), static_cast<uint32_t>(body)};
}

Result<Bytes> EncodeStoreRequest(const StoreRequest& r) {
  const size_t want_keys = r.op == StoreOp::kWait ? r.keys.size() : 1;
  if (!IsRequestOp(r.op) || r.keys.size() != want_keys || want_keys > kStoreMaxWaitKeys) {
    return InvalidArgument("store: cannot encode " + StoreOpName(static_cast<uint16_t>(r.op)) +
                           " with " + std::to_string(r.keys.size()) + " keys");
  }
  for (const auto& k : r.keys) HORA_RETURN_IF_ERROR(CheckKey(k));
  if (r.value.size() > kStoreMaxValueBytes) {
    return InvalidArgument("store: value for key '" + r.keys[0] + "' is " +
                           std::to_string(r.value.size()) + " bytes, limit " +
                           std::to_string(kStoreMaxValueBytes));
  }
  if (r.timeout_ms < 0 || r.timeout_ms > kStoreMaxTimeoutMs) {
    return InvalidArgument("store: timeout of " + std::to_string(r.timeout_ms) +
                           " ms is outside 0.." + std::to_string(kStoreMaxTimeoutMs));
  }
  Bytes body;
  if (r.op == StoreOp::kWait) PutIntField(&body, r.keys.size(), 4);
  for (const auto& k : r.keys) PutField(&body, k.data(), k.size());
  if (r.op == StoreOp::kSet) PutField(&body, r.value.data(), r.value.size());
  if (r.op == StoreOp::kAdd) PutIntField(&body, static_cast<uint64_t>(r.delta), 8);
  if (r.op == StoreOp::kGet || r.op == StoreOp::kWait) {
    PutIntField(&body, static_cast<uint64_t>(r.timeout_ms), 8);
  }
  return WithHeader(r.op, body);
}

Bytes EncodeStoreResponse(const StoreResponse& r) {
  Bytes body;
  if (r.code == StatusCode::kOk) {
    PutField(&body, r.value.data(), r.value.size());
    return WithHeader(StoreOp::kOk, body);
  }
  PutIntField(&body, static_cast<uint32_t>(r.code), 4);
  PutField(&body, r.message.data(), std::min(r.message.size(), kStoreMaxMessageBytes));
  return WithHeader(StoreOp::kError, body);
}

Result<StoreRequest> DecodeStoreRequest(const StoreHeader& h, const uint8_t* body, size_t n) {
  if (!IsRequestOp(h.op))
    return Malformed(StoreOpName(static_cast<uint16_t>(h.op)) + " is not a request");
  if (n != h.body_length) return Malformed("body is not the length its header says");
  FieldReader in(StoreOpName(static_cast<uint16_t>(h.op)), body, n);
  StoreRequest r;
  r.op = h.op;
  std::string_view value;
  uint64_t v = 0;
  switch (h.op) {
    case StoreOp::kSet:
      HORA_RETURN_IF_ERROR(in.Key(&r.keys));
      HORA_RETURN_IF_ERROR(in.Field("value", kStoreMaxValueBytes, &value));
      r.value.assign(value.begin(), value.end());
      break;
    case StoreOp::kGet:
      HORA_RETURN_IF_ERROR(in.Key(&r.keys));
      HORA_RETURN_IF_ERROR(in.Timeout(&r.timeout_ms));
      break;
    case StoreOp::kAdd:
      HORA_RETURN_IF_ERROR(in.Key(&r.keys));
      HORA_RETURN_IF_ERROR(in.Int("delta", 8, &v));
      r.delta = static_cast<int64_t>(v);
      break;
    case StoreOp::kWait: {
      HORA_RETURN_IF_ERROR(in.Int("count", 4, &v));
      // Each key takes at least its 4-byte length: a count the bytes cannot
      // hold is rejected before anything is reserved.
      if (v > kStoreMaxWaitKeys || v > in.left() / 4) {
        return Malformed("WAIT of " + std::to_string(v) + " keys (limit " +
                         std::to_string(kStoreMaxWaitKeys) + ", " + std::to_string(in.left()) +
                         " bytes remain)");
      }
      r.keys.reserve(v);
      for (uint64_t i = 0; i < v; ++i) HORA_RETURN_IF_ERROR(in.Key(&r.keys));
      HORA_RETURN_IF_ERROR(in.Timeout(&r.timeout_ms));
      break;
    }
    default:  // kDelete
      HORA_RETURN_IF_ERROR(in.Key(&r.keys));
      break;
  }
  HORA_RETURN_IF_ERROR(in.End());
  return r;
}

Result<StoreResponse> DecodeStoreResponse(const StoreHeader& h, const uint8_t* body, size_t n) {
  if (h.op != StoreOp::kOk && h.op != StoreOp::kError) {
    return Malformed(StoreOpName(static_cast<uint16_t>(h.op)) + " is not a response");
  }
  if (n != h.body_length) return Malformed("body is not the length its header says");
  FieldReader in(StoreOpName(static_cast<uint16_t>(h.op)), body, n);
  StoreResponse r;
  std::string_view text;
  if (h.op == StoreOp::kOk) {
    HORA_RETURN_IF_ERROR(in.Field("value", kStoreMaxValueBytes, &text));
    r.value.assign(text.begin(), text.end());
  } else {
    uint64_t code = 0;
    HORA_RETURN_IF_ERROR(in.Int("code", 4, &code));
    if (code == 0 || code > static_cast<uint64_t>(StatusCode::kUnimplemented)) {
      return Malformed("ERROR with status code " + std::to_string(code));
    }
    r.code = static_cast<StatusCode>(code);
    HORA_RETURN_IF_ERROR(in.Field("message", kStoreMaxMessageBytes, &text));
    r.message = std::string(text);
  }
  HORA_RETURN_IF_ERROR(in.End());
  return r;
}

Result<StoreRequest> DecodeStoreRequestMessage(const uint8_t* data, size_t n) {
  HORA_ASSIGN_OR_RETURN(StoreHeader h, DecodeStoreHeader(data, n));
  if (n - kStoreHeaderBytes != h.body_length) {
    return Malformed("message of " + std::to_string(n) + " bytes, header says body of " +
                     std::to_string(h.body_length));
  }
  return DecodeStoreRequest(h, data + kStoreHeaderBytes, n - kStoreHeaderBytes);
}

Result<StoreResponse> DecodeStoreResponseMessage(const uint8_t* data, size_t n) {
  HORA_ASSIGN_OR_RETURN(StoreHeader h, DecodeStoreHeader(data, n));
  if (n - kStoreHeaderBytes != h.body_length) {
    return Malformed("message of " + std::to_string(n) + " bytes, header says body of " +
                     std::to_string(h.body_length));
  }
  return DecodeStoreResponse(h, data + kStoreHeaderBytes, n - kStoreHeaderBytes);
}

}  // namespace hora
