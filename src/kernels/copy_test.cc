// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// CopyStreaming on every variant the machine runs: every byte arrives, for
// sizes below, at and around the 64-byte blocks the streaming stores write,
// and destinations at every offset from a 64-byte boundary's neighbourhood;
// the bytes around the destination are left as they were.
#include "kernels/copy.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "kernels/isa.h"
#include "support/kernel_test_util.h"

namespace hora::kernels {
namespace {

TEST(CopyStreaming, EveryByteArrivesAndNothingAround) {
  const size_t sizes[] = {0, 1, 63, 64, 65, 127, 128, 200, 4096 + 13, (size_t{1} << 20) + 7};
  const size_t offsets[] = {0, 1, 7, 32, 61, 63};
  constexpr size_t kGuard = 64;
  for (internal::Isa isa : test::SupportedIsas()) {
    for (size_t bytes : sizes) {
      std::vector<uint8_t> src(bytes + 64);
      for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i * 131 + 7);
      for (size_t src_off : {size_t{0}, size_t{3}}) {
        for (size_t off : offsets) {
          // 64-aligned storage, so that `off` is the destination's offset
          // from a 64-byte boundary.
          std::vector<uint8_t> buf(bytes + off + 2 * kGuard + 64, 0xEE);
          const auto base = reinterpret_cast<uintptr_t>(buf.data());
          uint8_t* aligned = buf.data() + (64 - base % 64) % 64;
          uint8_t* dst = aligned + kGuard + off;
          internal::CopyStreamingWith(isa, dst, src.data() + src_off, bytes);
          for (size_t i = 0; i < bytes; ++i) {
            ASSERT_EQ(dst[i], src[src_off + i])
                << internal::IsaName(isa) << " bytes " << bytes << " offset " << off << " at " << i;
          }
          for (uint8_t* p = buf.data(); p < dst; ++p) ASSERT_EQ(*p, 0xEE) << "before, " << bytes;
          for (uint8_t* p = dst + bytes; p < buf.data() + buf.size(); ++p)
            ASSERT_EQ(*p, 0xEE) << "after, " << bytes;
        }
      }
    }
  }
  // The public entry point: the best variant.
  std::vector<uint8_t> a(5000, 9), b(5000, 0);
  CopyStreaming(b.data() + 1, a.data(), 4999);
  EXPECT_EQ(b[0], 0);
  for (size_t i = 1; i < b.size(); ++i) ASSERT_EQ(b[i], 9) << i;
}

}  // namespace
}  // namespace hora::kernels
