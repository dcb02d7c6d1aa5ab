// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// Mutual authentication of a TCP connection with a per-job secret, before any
// other byte is read from the peer (design §5). HMAC-SHA256 challenge–response:
//
//   server -> client  hello:    magic "HRAU" | u16 version (big-endian) = 1 | server_nonce[32]
//   client -> server  response: magic "HRAU" | u16 version = 1 | client_nonce[32]
//                               | HMAC(secret, "hora-auth-v1 client" | server_nonce | client_nonce)
//   server -> client  proof:    HMAC(secret, "hora-auth-v1 server" | client_nonce | server_nonce)
//
// Nonces are 32 bytes from RAND_bytes; MACs are compared in constant time. The
// two labels differ, so neither side's MAC can be replayed as the other's.
// On any failure the server sends nothing more and the caller closes the
// connection; the server's error says only "authentication failed" (the
// caller logs the peer address). The client learns the precise reason (bad
// magic, version, a server that does not know the secret) and a client with
// the wrong secret sees the server close the connection.
//
// The secret must not be empty. Thread-safety: the functions are thread-safe;
// a ServerHandshake belongs to one connection.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/clock.h"
#include "hora/status.h"

namespace hora::net {

inline constexpr size_t kAuthNonceBytes = 32;
inline constexpr size_t kAuthMacBytes = 32;
inline constexpr size_t kAuthHelloBytes = 4 + 2 + kAuthNonceBytes;
inline constexpr size_t kAuthResponseBytes = 4 + 2 + kAuthNonceBytes + kAuthMacBytes;
inline constexpr size_t kAuthProofBytes = kAuthMacBytes;

// `bytes` random bytes (RAND_bytes) as 2 * bytes lowercase hex digits: a
// job secret (32 bytes), or an id unlikely to repeat.
Result<std::string> RandomHex(size_t bytes);

// Runs the server side on the connected socket `fd` (blocking or not), bounded
// by `deadline`. Error: Unavailable "authentication failed" (whatever the cause,
// including a timeout or a closed connection), or InvalidArgument for an
// empty secret.
Status AuthenticateAsServer(int fd, std::string_view secret, TimePoint deadline);

// Runs the client side, bounded by `deadline`. Errors name the cause: a
// server speaking another protocol or version, a server that closed the
// connection (usually: our secret is wrong), or one whose proof is wrong.
Status AuthenticateAsClient(int fd, std::string_view secret, TimePoint deadline);

// The server side as a step-by-step object, for event loops that must not
// block: send hello(), read kAuthResponseBytes, call Finish(), send the proof
// it returns. AuthenticateAsServer() is written on top of it.
class ServerHandshake {
 public:
  // Draws the server nonce. Fails on an empty secret or when the random
  // generator fails.
  static Result<ServerHandshake> Create(std::string_view secret);

  // The kAuthHelloBytes to send first.
  const std::vector<uint8_t>& hello() const { return hello_; }

  // Checks the client's response (must be exactly kAuthResponseBytes); on
  // success returns the kAuthProofBytes to send back. The error is always
  // Unavailable "authentication failed".
  Result<std::vector<uint8_t>> Finish(const uint8_t* response, size_t n) const;

 private:
  ServerHandshake() = default;
  std::string secret_;
  std::array<uint8_t, kAuthNonceBytes> nonce_{};
  std::vector<uint8_t> hello_;
};

}  // namespace hora::net
