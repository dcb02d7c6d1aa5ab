// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

namespace hora::bench {

Times Summarize(std::vector<double> us) {
  Times t;
  if (us.empty()) return t;
  std::sort(us.begin(), us.end());
  for (double x : us) t.avg += x;
  t.avg /= static_cast<double>(us.size());
  t.p50 = us[us.size() / 2];
  const auto k = static_cast<size_t>(std::ceil(static_cast<double>(us.size()) * 0.99));
  t.p99 = us[std::min(us.size(), std::max<size_t>(k, 1)) - 1];
  return t;
}

void PrintHeader(const Args& a, int ranks, const std::string& limit_line) {
  const std::string small = a.iters_small > 0 && a.iters_small != a.iters
                                ? " (" + std::to_string(a.iters_small) + " up to 64 KiB)"
                                : std::string();
  std::printf("# hora-bench %s: %d ranks, dtype %s, op %s, %s, %d iterations%s after %d warm-up\n",
              CollectiveName(a.collective), ranks, DataTypeName(a.dtype), ReduceOpName(a.op),
              a.inplace ? "in place" : "out of place", a.iters, small.c_str(), a.warmup);
  std::printf("# %s\n", limit_line.c_str());
  std::printf("# %12s %12s %-10s %10s %10s %10s %9s %9s %7s\n", "size(B)", "count", "impl",
              "avg(us)", "p50(us)", "p99(us)", "algbw", "busbw", "#wrong");
  std::printf("# %12s %12s %-10s %10s %10s %10s %9s %9s %7s\n", "", "", "", "", "", "", "(GB/s)",
              "(GB/s)", "");
  std::fflush(stdout);
}

void PrintRow(const Record& r) {
  if (!r.error.empty()) {
    std::printf("  %12llu %12s %-10s  %s\n", static_cast<unsigned long long>(r.size_bytes), "",
                r.impl.c_str(), r.error.c_str());
  } else {
    std::printf("  %12llu %12llu %-10s %10.1f %10.1f %10.1f %9.3f %9.3f %7s\n",
                static_cast<unsigned long long>(r.size_bytes),
                static_cast<unsigned long long>(r.count), r.impl.c_str(), r.avg_us, r.p50_us,
                r.p99_us, r.algbw_gbps, r.busbw_gbps,
                r.wrong < 0 ? "-" : std::to_string(r.wrong).c_str());
  }
  std::fflush(stdout);
}

void PrintComparison(const std::vector<Record>& records) {
  std::map<uint64_t, const Record*> hora, best;
  for (const Record& r : records) {
    // (NCCL's stand-in on the host device is no peer: its times mean nothing.)
    if (!r.error.empty() || r.impl == "nccl@host") continue;
    if (r.impl == "hora") {
      hora[r.size_bytes] = &r;
    } else if (!best.count(r.size_bytes) || best[r.size_bytes]->busbw_gbps < r.busbw_gbps) {
      best[r.size_bytes] = &r;
    }
  }
  if (best.empty()) return;
  std::printf("# Hora against the best peer at each size (ratio > 1: Hora faster)\n");
  std::printf("# %12s %12s %-10s %12s %8s\n", "size(B)", "hora busbw", "best peer", "peer busbw",
              "ratio");
  for (const auto& [size, h] : hora) {
    auto it = best.find(size);
    if (it == best.end()) continue;
    const Record& p = *it->second;
    std::printf("  %12llu %12.3f %-10s %12.3f %8.2f\n", static_cast<unsigned long long>(size),
                h->busbw_gbps, p.impl.c_str(), p.busbw_gbps,
                p.avg_us > 0 ? p.avg_us / h->avg_us : 0.0);
  }
  std::fflush(stdout);
}

Result<std::vector<Record>> RecordsFromJson(const std::string& text) {
  std::vector<Record> out;
  try {
    for (const auto& j : nlohmann::json::parse(text)) {
      Record r;
      r.impl = j.value("impl", "");
      r.collective = j.value("collective", "");
      r.dtype = j.value("dtype", "");
      r.op = j.value("op", "");
      r.algo = j.value("algo", "");
      r.ranks = j.value("ranks", 0);
      r.inplace = j.value("inplace", false);
      r.size_bytes = j.value("size_bytes", uint64_t{0});
      r.count = j.value("count", uint64_t{0});
      r.avg_us = j.value("avg_us", 0.0);
      r.p50_us = j.value("p50_us", 0.0);
      r.iters = j.value("iters", 0);
      r.p99_us = j.value("p99_us", 0.0);
      r.algbw_gbps = j.value("algbw_gbps", 0.0);
      r.busbw_gbps = j.value("busbw_gbps", 0.0);
      r.wrong = j.contains("wrong") && j["wrong"].is_number() ? j["wrong"].get<long>() : -1;
      r.error = j.value("error", "");
      out.push_back(std::move(r));
    }
  } catch (const std::exception& e) {
    return InvalidArgument(std::string("torch peer output is not a JSON list: ") + e.what());
  }
  return out;
}

Status WriteJson(const std::string& path, const std::vector<Record>& records) {
  nlohmann::json list = nlohmann::json::array();
  for (const Record& r : records) {
    nlohmann::json j = {{"impl", r.impl},
                        {"collective", r.collective},
                        {"size_bytes", r.size_bytes},
                        {"count", r.count},
                        {"dtype", r.dtype},
                        {"op", r.op},
                        {"algo", r.algo},
                        {"ranks", r.ranks},
                        {"iters", r.iters},
                        {"inplace", r.inplace},
                        {"avg_us", r.avg_us},
                        {"p50_us", r.p50_us},
                        {"p99_us", r.p99_us},
                        {"algbw_gbps", r.algbw_gbps},
                        {"busbw_gbps", r.busbw_gbps},
                        {"limit_kind", r.limit_kind},
                        {"limit_gbps", r.limit_gbps}};
    j["wrong"] = r.wrong < 0 ? nlohmann::json(nullptr) : nlohmann::json(r.wrong);
    if (!r.error.empty()) j["error"] = r.error;
    list.push_back(std::move(j));
  }
  std::ofstream f(path);
  if (!f) return InvalidArgument("--json '" + path + "': cannot open for writing");
  f << list.dump(1) << "\n";
  if (!f) return UnavailableError("--json '" + path + "': write failed");
  return Status::Ok();
}

}  // namespace hora::bench
