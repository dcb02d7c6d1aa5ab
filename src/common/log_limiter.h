// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// Keeps one kind of message from flooding the log: at most `per_window` of
// them are said in each window; the rest are counted, and the count is said
// in one line once the window is over ("refused 37 more connections in the
// last 10 s"). Refused connections use it: a peer that connects without the
// secret again and again cannot fill the disk or hide the other messages.
//
// Not thread-safe: one owner (an event loop, a setup function).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "common/clock.h"

namespace hora {

class LogLimiter {
 public:
  explicit LogLimiter(int per_window = 5, Duration window = std::chrono::seconds(10))
      : per_window_(per_window), window_(window) {}

  // Says `message` through `say(std::string)` unless this window's messages
  // are used up (then counts it). Says the count of a finished window first.
  template <typename Say>
  void Note(TimePoint now, const std::string& message, Say&& say) {
    Flush(now, say);
    if (said_ < per_window_) {
      ++said_;
      say(message);
    } else {
      ++held_;
    }
  }

  // Once the window is over: says how many were held back in it (if any),
  // and starts the next. Call it now and then from a loop, and at its end
  // with `force`.
  template <typename Say>
  void Flush(TimePoint now, Say&& say, bool force = false) {
    if (!force && now - start_ < window_) return;
    if (held_ > 0) {
      say("... and " + std::to_string(held_) + " more like it in the last " +
          std::to_string(static_cast<long long>(DurationToSeconds(now - start_) + 0.5)) + " s");
    }
    start_ = now;
    said_ = 0;
    held_ = 0;
  }

  uint64_t held() const { return held_; }
  // When the current window ends (a loop with messages held may wake then).
  TimePoint window_end() const { return start_ + window_; }

 private:
  const int per_window_;
  const Duration window_;
  TimePoint start_{};
  int said_ = 0;
  uint64_t held_ = 0;
};

}  // namespace hora
