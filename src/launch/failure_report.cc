// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "launch/failure_report.h"

namespace hora {

std::string FailureCountKey(const std::string& job) { return "hora/" + job + "/failures"; }

std::string RankEndedKey(const std::string& job) { return "hora/" + job + "/rank_ended"; }

std::string FailureKey(const std::string& job, int64_t n) {
  return "hora/" + job + "/failure/" + std::to_string(n);
}

std::string FormatFailure(const FailureReport& report) {
  return report.who + (report.caused_by_peer ? "\npeer\n" : "\nown\n") + report.what;
}

std::optional<FailureReport> ParseFailure(const std::string& value) {
  const size_t nl = value.find('\n');
  if (nl == std::string::npos || nl == 0) return std::nullopt;
  const size_t nl2 = value.find('\n', nl + 1);
  const std::string kind =
      nl2 == std::string::npos ? std::string() : value.substr(nl + 1, nl2 - nl - 1);
  if (kind != "own" && kind != "peer") {  // (an older Hora's "who\nwhat": its own)
    return FailureReport{value.substr(0, nl), value.substr(nl + 1), false};
  }
  return FailureReport{value.substr(0, nl), value.substr(nl2 + 1), kind == "peer"};
}

}  // namespace hora
