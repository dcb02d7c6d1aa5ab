// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "net/auth.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <cstring>

#include "net/socket.h"

namespace hora::net {
namespace {

constexpr uint8_t kMagic[4] = {'H', 'R', 'A', 'U'};
constexpr uint16_t kVersion = 1;
constexpr std::string_view kClientLabel = "hora-auth-v1 client";
constexpr std::string_view kServerLabel = "hora-auth-v1 server";

using Nonce = std::array<uint8_t, kAuthNonceBytes>;
using Mac = std::array<uint8_t, kAuthMacBytes>;

Status AuthFailed() { return UnavailableError("authentication failed"); }

Status RandomNonce(Nonce* nonce) {
  if (RAND_bytes(nonce->data(), static_cast<int>(nonce->size())) != 1) {
    return InternalError("authentication: RAND_bytes failed");
  }
  return Status::Ok();
}

// HMAC-SHA256(secret, label | a | b).
Mac ComputeMac(std::string_view secret, std::string_view label, const uint8_t* a,
               const uint8_t* b) {
  std::vector<uint8_t> msg(label.begin(), label.end());
  msg.insert(msg.end(), a, a + kAuthNonceBytes);
  msg.insert(msg.end(), b, b + kAuthNonceBytes);
  Mac mac{};
  unsigned int len = 0;
  HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()), msg.data(), msg.size(),
       mac.data(), &len);
  return mac;
}

void PutPreamble(std::vector<uint8_t>* out) {
  out->insert(out->end(), kMagic, kMagic + 4);
  out->push_back(static_cast<uint8_t>(kVersion >> 8));
  out->push_back(static_cast<uint8_t>(kVersion & 0xff));
}

// Checks magic and version at `p` (6 bytes); `who` names the sender.
Status CheckPreamble(const uint8_t* p, const char* who) {
  if (std::memcmp(p, kMagic, 4) != 0) {
    return UnavailableError(std::string("authentication failed: the ") + who +
                            " does not speak the Hora protocol (bad magic)");
  }
  const unsigned version = (unsigned{p[4]} << 8) | p[5];
  if (version != kVersion) {
    return UnavailableError(std::string("authentication failed: the ") + who +
                            " speaks authentication version " + std::to_string(version) +
                            ", this build speaks " + std::to_string(kVersion));
  }
  return Status::Ok();
}

Status CheckSecret(std::string_view secret) {
  if (secret.empty()) return InvalidArgument("authentication: the job secret is empty");
  if (secret.size() > (1u << 20)) return InvalidArgument("authentication: the secret is too long");
  return Status::Ok();
}

}  // namespace

Result<ServerHandshake> ServerHandshake::Create(std::string_view secret) {
  HORA_RETURN_IF_ERROR(CheckSecret(secret));
  ServerHandshake hs;
  hs.secret_ = std::string(secret);
  HORA_RETURN_IF_ERROR(RandomNonce(&hs.nonce_));
  PutPreamble(&hs.hello_);
  hs.hello_.insert(hs.hello_.end(), hs.nonce_.begin(), hs.nonce_.end());
  return hs;
}

Result<std::vector<uint8_t>> ServerHandshake::Finish(const uint8_t* response, size_t n) const {
  if (n != kAuthResponseBytes || !CheckPreamble(response, "client").ok()) return AuthFailed();
  const uint8_t* client_nonce = response + 6;
  const uint8_t* client_mac = client_nonce + kAuthNonceBytes;
  const Mac expected = ComputeMac(secret_, kClientLabel, nonce_.data(), client_nonce);
  if (CRYPTO_memcmp(expected.data(), client_mac, kAuthMacBytes) != 0) return AuthFailed();
  const Mac proof = ComputeMac(secret_, kServerLabel, client_nonce, nonce_.data());
  return std::vector<uint8_t>(proof.begin(), proof.end());
}

Status AuthenticateAsServer(int fd, std::string_view secret, TimePoint deadline) {
  HORA_ASSIGN_OR_RETURN(ServerHandshake hs, ServerHandshake::Create(secret));
  if (!SendAll(fd, hs.hello().data(), hs.hello().size(), deadline).ok()) return AuthFailed();
  uint8_t response[kAuthResponseBytes];
  if (!RecvAll(fd, response, sizeof response, deadline).ok()) return AuthFailed();
  HORA_ASSIGN_OR_RETURN(std::vector<uint8_t> proof, hs.Finish(response, sizeof response));
  if (!SendAll(fd, proof.data(), proof.size(), deadline).ok()) return AuthFailed();
  return Status::Ok();
}

Status AuthenticateAsClient(int fd, std::string_view secret, TimePoint deadline) {
  HORA_RETURN_IF_ERROR(CheckSecret(secret));
  uint8_t hello[kAuthHelloBytes];
  Status st = RecvAll(fd, hello, sizeof hello, deadline);
  if (!st.ok()) {
    return Status(st.code(), "authentication failed: no greeting from the server: " + st.message());
  }
  HORA_RETURN_IF_ERROR(CheckPreamble(hello, "server"));
  const uint8_t* server_nonce = hello + 6;
  Nonce client_nonce{};
  HORA_RETURN_IF_ERROR(RandomNonce(&client_nonce));
  const Mac mac = ComputeMac(secret, kClientLabel, server_nonce, client_nonce.data());
  std::vector<uint8_t> response;
  PutPreamble(&response);
  response.insert(response.end(), client_nonce.begin(), client_nonce.end());
  response.insert(response.end(), mac.begin(), mac.end());
  st = SendAll(fd, response.data(), response.size(), deadline);
  if (!st.ok()) return Status(st.code(), "authentication failed: " + st.message());
  Mac proof{};
  st = RecvAll(fd, proof.data(), proof.size(), deadline);
  if (!st.ok()) {
    return Status(st.code(), "authentication failed: the server refused us (" + st.message() +
                                 "); is the job secret the same on both sides?");
  }
  const Mac expected = ComputeMac(secret, kServerLabel, client_nonce.data(), server_nonce);
  if (CRYPTO_memcmp(expected.data(), proof.data(), kAuthMacBytes) != 0) {
    return UnavailableError(
        "authentication failed: the server does not know the job secret (wrong proof)");
  }
  return Status::Ok();
}

Result<std::string> RandomHex(size_t bytes) {
  std::vector<unsigned char> buf(bytes);
  if (!buf.empty() && RAND_bytes(buf.data(), static_cast<int>(buf.size())) != 1) {
    return InternalError("cannot get random bytes (RAND_bytes failed)");
  }
  static const char* kHex = "0123456789abcdef";
  std::string s;
  s.reserve(2 * bytes);
  for (unsigned char b : buf) {
    s += kHex[b >> 4];
    s += kHex[b & 15];
  }
  return s;
}

}  // namespace hora::net
