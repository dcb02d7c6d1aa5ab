// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "store/tcp_store_client.h"

#include <cstring>

#include "net/auth.h"

namespace hora {
namespace {

// Store timeouts travel in whole milliseconds, rounded up and clamped.
int64_t ToWireMs(Duration timeout) {
  if (timeout <= Duration::zero()) return 0;
  const auto ms = std::chrono::ceil<std::chrono::milliseconds>(timeout).count();
  return std::min<int64_t>(ms, kStoreMaxTimeoutMs);
}

}  // namespace

Result<std::unique_ptr<TcpStoreClient>> TcpStoreClient::Connect(const net::HostPort& server,
                                                                std::string_view secret,
                                                                Duration timeout) {
  const std::string where = "store " + server.ToString() + ": ";
  if (secret.empty()) return InvalidArgument(where + "the job secret is empty");
  const TimePoint deadline = Clock::now() + timeout;
  Result<net::Fd> fd = net::Connect(server, timeout);
  if (!fd.ok()) return fd.status().WithContext("store");
  Status st = net::AuthenticateAsClient(fd->get(), secret, deadline);
  if (!st.ok()) return Status(st.code(), where + st.message());
  return std::unique_ptr<TcpStoreClient>(
      new TcpStoreClient(server, std::move(fd).value(), timeout));
}

Status TcpStoreClient::Context(const Status& st) const {
  return Status(st.code(), "store " + server_.ToString() + ": " + st.message());
}

Result<Bytes> TcpStoreClient::Call(const StoreRequest& request, Duration io_timeout) {
  HORA_ASSIGN_OR_RETURN(Bytes message, EncodeStoreRequest(request));
  MutexLock lock(mu_);
  if (!broken_.ok()) {
    return UnavailableError("store " + server_.ToString() +
                            ": connection unusable after an earlier error: " + broken_.message());
  }
  const TimePoint deadline = Clock::now() + io_timeout;
  const std::string what = StoreOpName(static_cast<uint16_t>(request.op)) + " '" +
                           (request.keys.empty() ? std::string() : request.keys[0]) + "'";
  // Any failure below leaves the stream out of step: close it for good.
  auto fail = [&](const Status& st) HORA_REQUIRES(mu_) {
    broken_ = Context(Status(st.code(), what + ": " + st.message()));
    fd_.Reset();
    return broken_;
  };
  Status st = net::SendAll(fd_.get(), message.data(), message.size(), deadline);
  if (!st.ok()) return fail(st);
  uint8_t header_bytes[kStoreHeaderBytes];
  st = net::RecvAll(fd_.get(), header_bytes, sizeof header_bytes, deadline);
  if (!st.ok()) return fail(st);
  Result<StoreHeader> header = DecodeStoreHeader(header_bytes, sizeof header_bytes);
  if (!header.ok()) return fail(header.status());
  if (header->op != StoreOp::kOk && header->op != StoreOp::kError) {
    return fail(InvalidArgument("malformed store message: the server answered with " +
                                StoreOpName(static_cast<uint16_t>(header->op))));
  }
  // The header decoder bounded body_length by kStoreMaxBodyBytes.
  Bytes body(header->body_length);
  st = net::RecvAll(fd_.get(), body.data(), body.size(), deadline);
  if (!st.ok()) return fail(st);
  Result<StoreResponse> response = DecodeStoreResponse(*header, body.data(), body.size());
  if (!response.ok()) return fail(response.status());
  if (response->code != StatusCode::kOk) return Context(Status(response->code, response->message));
  return std::move(response->value);
}

Status TcpStoreClient::Set(const std::string& key, const Bytes& value) {
  StoreRequest r;
  r.op = StoreOp::kSet;
  r.keys = {key};
  r.value = value;
  return Call(r, op_timeout_).status();
}

Result<Bytes> TcpStoreClient::Get(const std::string& key, Duration timeout) {
  StoreRequest r;
  r.op = StoreOp::kGet;
  r.keys = {key};
  r.timeout_ms = ToWireMs(timeout);
  return Call(r, std::chrono::milliseconds(r.timeout_ms) + kResponseMargin);
}

Result<int64_t> TcpStoreClient::Add(const std::string& key, int64_t delta) {
  StoreRequest r;
  r.op = StoreOp::kAdd;
  r.keys = {key};
  r.delta = delta;
  HORA_ASSIGN_OR_RETURN(Bytes v, Call(r, op_timeout_));
  int64_t value = 0;
  if (v.size() != sizeof value) {
    return Context(InvalidArgument("ADD '" + key + "': the server answered " +
                                   std::to_string(v.size()) + " bytes, not a counter"));
  }
  std::memcpy(&value, v.data(), sizeof value);
  return value;
}

Status TcpStoreClient::Wait(const std::vector<std::string>& keys, Duration timeout) {
  StoreRequest r;
  r.op = StoreOp::kWait;
  r.keys = keys;
  r.timeout_ms = ToWireMs(timeout);
  return Call(r, std::chrono::milliseconds(r.timeout_ms) + kResponseMargin).status();
}

Result<bool> TcpStoreClient::Delete(const std::string& key) {
  StoreRequest r;
  r.op = StoreOp::kDelete;
  r.keys = {key};
  HORA_ASSIGN_OR_RETURN(Bytes v, Call(r, op_timeout_));
  if (v.size() != 1) {
    return Context(InvalidArgument("DELETE '" + key + "': the server answered " +
                                   std::to_string(v.size()) + " bytes, expected 1"));
  }
  return v[0] != 0;
}

}  // namespace hora
