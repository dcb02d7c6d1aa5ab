// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// Reduce-scatter, allgather and alltoall on a shared window
// (ReducescatterShared, AllgatherShared, AlltoallShared), on both transports that offer one, ranks
// as threads: splits even, uneven, empty and of several rounds, in place and not, each element
// checked against its own expectation; ranks that disagree on the size, or on its split, fail alike
// with a Mismatch, and the window goes on.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "collectives/algorithms.h"
#include "support/window_groups.h"

namespace hora {
namespace {

using std::chrono::seconds;
using testing::OnRanks;

class WindowCollectives : public testing::WindowGroupTest {};

// Reduce-scatter on the window: splits even, uneven, empty and of many
// rounds (a round's piece of a block at 2 ranks is 512 KiB), with scale
// factors (where the copy in prescales, the own block too), on 2, 3 and 5
// ranks; each element checked against its own reduction, then finalized.
TEST_P(WindowCollectives, ReducescattersOfEverySplitAcrossRounds) {
  const std::vector<std::vector<size_t>> cases = {
      {0, 0, 0, 0, 0}, {1, 0, 7, 3, 0}, {300001, 5, 0, 131072, 262147}, {1, 1, 1, 1, 1}};
  for (const int n : {2, 3, 5}) {
    auto ts = Group(n);
    for (const auto& all : cases) {
      const std::vector<size_t> counts(all.begin(), all.begin() + n);
      size_t total = 0;
      for (size_t c : counts) total += c;
      for (const Reduction red :
           {Reduction{ReduceOp::kSum, 1.0, 1.0}, Reduction{ReduceOp::kAverage, 0.5, 4.0},
            Reduction{ReduceOp::kMax, 1.0, 1.0}}) {
        auto st = OnRanks(ts, [&](int r, Transport& t) -> Status {
          Comm comm(t, WaitPolicy{seconds(60)}, 256 << 10, 1);
          auto value = [](int k, size_t e) { return static_cast<float>((e * 3 + k * 5) % 13); };
          std::vector<float> in(total);
          for (size_t e = 0; e < total; ++e) in[e] = value(r, e);
          const auto me = static_cast<size_t>(r);
          std::vector<float> out(counts[me], -1.0f);
          HORA_RETURN_IF_ERROR(
              ReducescatterShared(comm, in.data(), out.data(), counts, DataType::kFloat32, red));
          size_t offset = 0;
          for (size_t q = 0; q < me; ++q) offset += counts[q];
          for (size_t e = 0; e < counts[me]; ++e) {
            float want = 0;
            for (int k = 0; k < n; ++k) {
              const float pre = value(k, offset + e) * static_cast<float>(red.prescale_factor);
              want = red.op == ReduceOp::kMax ? std::max(want, pre) : want + pre;
            }
            // (An average multiplies once by postscale / n: within a rounding.)
            if (red.op == ReduceOp::kAverage) want /= static_cast<float>(n);
            want *= static_cast<float>(red.postscale_factor);
            if (std::abs(out[e] - want) > 1e-6f * std::abs(want)) {
              return InternalError("rank " + std::to_string(r) + " element " + std::to_string(e) +
                                   ": " + std::to_string(out[e]) + " != " + std::to_string(want));
            }
          }
          return Status::Ok();
        });
        for (int r = 0; r < n; ++r) {
          EXPECT_TRUE(st[r].ok()) << n << " ranks, " << total << " elements, rank " << r << ": "
                                  << st[r].ToString();
        }
      }
    }
  }
}

// Allgather on the window: blocks empty, uneven, of several rounds (half a
// region, 1 MiB, a round), in place and not, on 2, 3 and 5 ranks; every
// byte checked. Ranks that disagree on the size fail alike, and the window
// goes on.
TEST_P(WindowCollectives, AllgathersOfEverySizeAcrossRounds) {
  const std::vector<std::vector<size_t>> cases = {
      {0, 0, 0, 0, 0}, {1, 0, 7, 3, 0}, {(size_t{3} << 20) + 5, 1, 0, size_t{1} << 20, 77}};
  for (const int n : {2, 3, 5}) {
    auto ts = Group(n);
    for (const auto& all : cases) {
      const std::vector<size_t> bytes(all.begin(), all.begin() + n);
      for (const bool in_place : {false, true}) {
        auto st = OnRanks(ts, [&](int r, Transport& t) -> Status {
          Comm comm(t, WaitPolicy{seconds(60)}, 256 << 10, 1);
          auto byte = [](size_t q, size_t i) {
            return static_cast<uint8_t>(q * 41 + i * 7 + (i >> 10));
          };
          const auto me = static_cast<size_t>(r);
          size_t offset = 0, total = 0;
          for (size_t q = 0; q < bytes.size(); ++q) {
            if (q < me) offset += bytes[q];
            total += bytes[q];
          }
          std::vector<uint8_t> in(bytes[me]), out(total, 0xEE);
          for (size_t i = 0; i < bytes[me]; ++i) in[i] = byte(me, i);
          if (in_place) std::copy(in.begin(), in.end(), out.begin() + static_cast<long>(offset));
          HORA_RETURN_IF_ERROR(
              AllgatherShared(comm, in_place ? out.data() + offset : in.data(), out.data(), bytes));
          for (size_t q = 0, at = 0; q < bytes.size(); at += bytes[q], ++q) {
            for (size_t i = 0; i < bytes[q]; ++i) {
              if (out[at + i] != byte(q, i)) {
                return InternalError("rank " + std::to_string(r) + ": block " + std::to_string(q) +
                                     " byte " + std::to_string(i) + " wrong");
              }
            }
          }
          return Status::Ok();
        });
        for (int r = 0; r < n; ++r) {
          EXPECT_TRUE(st[r].ok()) << n << " ranks, rank " << r << ": " << st[r].ToString();
        }
      }
    }
  }
  auto ts = Group(3);
  auto st = OnRanks(ts, [&](int r, Transport& t) -> Status {
    Comm comm(t, WaitPolicy{seconds(60)}, 256 << 10, 1);
    std::vector<uint8_t> in(10, static_cast<uint8_t>(r)), out(30);
    const std::vector<size_t> bytes = {10, 10, static_cast<size_t>(r == 2 ? 9 : 10)};
    Status sizes = AllgatherShared(comm, in.data(), out.data(), bytes);
    if (sizes.code() != StatusCode::kMismatch ||
        sizes.message().find("rank 2: allgather of 29 bytes") == std::string::npos) {
      return InternalError("want a Mismatch naming both sizes: " + sizes.ToString());
    }
    // The same total, split otherwise on rank 0 (and a block longer than
    // the others' would take more rounds: it must fail before any).
    const std::vector<size_t> swapped = {r == 0 ? 20u : 10u, r == 0 ? 0u : 10u, 10};
    std::vector<uint8_t> wide(20, static_cast<uint8_t>(r));
    Status split = AllgatherShared(comm, r == 0 ? wide.data() : in.data(), out.data(), swapped);
    if (split.code() != StatusCode::kMismatch ||
        split.message().find("rank 0: allgather of 30 bytes in all (rows per rank: pattern") ==
            std::string::npos) {
      return InternalError("want a Mismatch naming the splits: " + split.ToString());
    }
    const std::vector<size_t> even = {10, 10, 10};
    HORA_RETURN_IF_ERROR(AllgatherShared(comm, in.data(), out.data(), even));
    for (size_t i = 0; i < out.size(); ++i) {
      if (out[i] != i / 10) return InternalError("wrong byte " + std::to_string(i));
    }
    return Status::Ok();
  });
  for (int r = 0; r < 3; ++r) EXPECT_TRUE(st[r].ok()) << "rank " << r << ": " << st[r].ToString();
}

// Ranks that reduce-scatter different sizes fail alike with a Mismatch
// naming each rank's call, and the window goes on.
TEST_P(WindowCollectives, ReducescattersThatDisagreeFailAlikeAndTheWindowGoesOn) {
  const int n = 3;
  auto ts = Group(n);
  auto st = OnRanks(ts, [&](int r, Transport& t) -> Status {
    Comm comm(t, WaitPolicy{seconds(60)}, 256 << 10, 1);
    const std::vector<size_t> counts = {4, 4, static_cast<size_t>(r == 1 ? 5 : 4)};
    std::vector<int32_t> in(13, r + 1), out(4);
    Status sizes = ReducescatterShared(comm, in.data(), out.data(), counts, DataType::kInt32, {});
    if (sizes.code() != StatusCode::kMismatch ||
        sizes.message().find("rank 1: reducescatter of 13 int32 (52 bytes)") == std::string::npos ||
        sizes.message().find("rank 0: reducescatter of 12 int32 (48 bytes)") == std::string::npos) {
      return InternalError("want a Mismatch naming both sizes: " + sizes.ToString());
    }
    // The same total, split otherwise on rank 2.
    const std::vector<size_t> swapped = {r == 2 ? 5u : 4u, 4, r == 2 ? 3u : 4u};
    Status split = ReducescatterShared(comm, in.data(), out.data(), swapped, DataType::kInt32, {});
    if (split.code() != StatusCode::kMismatch ||
        split.message().find(
            "rank 2: reducescatter of 12 int32 (48 bytes) (elements per rank: pattern") ==
            std::string::npos) {
      return InternalError("want a Mismatch naming the splits: " + split.ToString());
    }
    const std::vector<size_t> even = {4, 4, 4};
    HORA_RETURN_IF_ERROR(
        ReducescatterShared(comm, in.data(), out.data(), even, DataType::kInt32, {}));
    for (int32_t v : out) {
      if (v != 6) return InternalError("wrong value " + std::to_string(v));
    }
    return Status::Ok();
  });
  for (int r = 0; r < n; ++r) EXPECT_TRUE(st[r].ok()) << "rank " << r << ": " << st[r].ToString();
}

// Alltoall on the window: blocks empty, uneven, of one slot and of several
// rounds (a slot is half a region over the ranks), on 2, 3 and 5 ranks;
// every byte checked. Ranks that disagree on the splits fail alike, and the
// window goes on.
TEST_P(WindowCollectives, AlltoallsOfEverySplitAcrossRounds) {
  for (const int n : {2, 3, 5}) {
    auto ts = Group(n);
    const auto un = static_cast<size_t>(n);
    const size_t slot = (size_t{1} << 20) / un / 64 * 64;
    // Rank p sends rank q bytes(p, q): zeros, odd sizes, a whole slot and a
    // block two and a half rounds long.
    const std::vector<std::function<size_t(size_t, size_t)>> cases = {
        [](size_t, size_t) { return size_t{0}; },
        [](size_t p, size_t q) { return (p * 7 + q * 3) % 5; },
        [&](size_t p, size_t q) { return p == q ? 3 : slot; },
        [&](size_t p, size_t q) { return p == 1 && q == 0 ? slot * 5 / 2 : (p + 1) * (q + 2); }};
    for (const auto& bytes : cases) {
      std::vector<size_t> all(un * un);
      for (size_t p = 0; p < un; ++p) {
        for (size_t q = 0; q < un; ++q) all[p * un + q] = bytes(p, q);
      }
      auto st = OnRanks(ts, [&](int r, Transport& t) -> Status {
        Comm comm(t, WaitPolicy{seconds(60)}, 256 << 10, 1);
        auto byte = [](size_t p, size_t q, size_t i) {
          return static_cast<uint8_t>(p * 41 + q * 13 + i * 7 + (i >> 10));
        };
        const auto me = static_cast<size_t>(r);
        size_t sent = 0, received = 0;
        for (size_t q = 0; q < un; ++q) {
          sent += all[me * un + q];
          received += all[q * un + me];
        }
        std::vector<uint8_t> in(sent), out(received, 0xEE);
        for (size_t q = 0, at = 0; q < un; at += all[me * un + q], ++q) {
          for (size_t i = 0; i < all[me * un + q]; ++i) in[at + i] = byte(me, q, i);
        }
        HORA_RETURN_IF_ERROR(AlltoallShared(comm, in.data(), out.data(), all));
        for (size_t p = 0, at = 0; p < un; at += all[p * un + me], ++p) {
          for (size_t i = 0; i < all[p * un + me]; ++i) {
            if (out[at + i] != byte(p, me, i)) {
              return InternalError("rank " + std::to_string(r) + ": block from " +
                                   std::to_string(p) + " byte " + std::to_string(i) + " wrong");
            }
          }
        }
        return Status::Ok();
      });
      for (int r = 0; r < n; ++r) {
        EXPECT_TRUE(st[r].ok()) << n << " ranks, rank " << r << ": " << st[r].ToString();
      }
    }
  }
  auto ts = Group(3);
  auto st = OnRanks(ts, [&](int r, Transport& t) -> Status {
    Comm comm(t, WaitPolicy{seconds(60)}, 256 << 10, 1);
    std::vector<uint8_t> in(40, static_cast<uint8_t>(r)), out(40);
    std::vector<size_t> all(9, 4);
    if (r == 2) all[5] = 5;  // rank 2 thinks rank 1 sends it 5 bytes
    Status sizes = AlltoallShared(comm, in.data(), out.data(), all);
    if (sizes.code() != StatusCode::kMismatch ||
        sizes.message().find("rank 2: alltoall of 37 bytes in all") == std::string::npos ||
        sizes.message().find("rank 0: alltoall of 36 bytes in all") == std::string::npos) {
      return InternalError("want a Mismatch naming both sizes: " + sizes.ToString());
    }
    // The same total, split otherwise on rank 0.
    std::vector<size_t> swapped(9, 4);
    if (r == 0) swapped[1] = 5, swapped[2] = 3;
    Status split = AlltoallShared(comm, in.data(), out.data(), swapped);
    if (split.code() != StatusCode::kMismatch ||
        split.message().find("rank 0: alltoall of 36 bytes in all (splits") == std::string::npos) {
      return InternalError("want a Mismatch naming the splits: " + split.ToString());
    }
    const std::vector<size_t> even(9, 4);
    std::vector<uint8_t> twelve(12, static_cast<uint8_t>(r)), got(12);
    HORA_RETURN_IF_ERROR(AlltoallShared(comm, twelve.data(), got.data(), even));
    for (size_t i = 0; i < got.size(); ++i) {
      if (got[i] != i / 4) return InternalError("wrong byte " + std::to_string(i));
    }
    return Status::Ok();
  });
  for (int r = 0; r < 3; ++r) EXPECT_TRUE(st[r].ok()) << "rank " << r << ": " << st[r].ToString();
}

INSTANTIATE_TEST_SUITE_P(Transports, WindowCollectives, ::testing::Values("loopback", "shm"),
                         testing::TransportName);

}  // namespace
}  // namespace hora
