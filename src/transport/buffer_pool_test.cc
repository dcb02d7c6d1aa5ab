// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "transport/buffer_pool.h"

#include <gtest/gtest.h>

namespace hora {
namespace {

TEST(BufferPool, HandsBackTheSmallestSpareThatFits) {
  BufferPool pool;
  PooledBuffer a = pool.Take(1000), b = pool.Take(5000);
  ASSERT_NE(a.data, nullptr);
  EXPECT_EQ(a.bytes, 1000u);
  EXPECT_EQ(a.capacity, 1000u);
  const std::byte* a_mem = a.data.get();
  const std::byte* b_mem = b.data.get();
  pool.Give(std::move(b));
  pool.Give(std::move(a));
  EXPECT_EQ(pool.spare_buffers(), 2u);
  EXPECT_EQ(pool.spare_bytes(), 6000u);

  PooledBuffer c = pool.Take(800);  // both fit: the 1000-byte one
  EXPECT_EQ(c.data.get(), a_mem);
  EXPECT_EQ(c.bytes, 800u);
  EXPECT_EQ(c.capacity, 1000u);
  PooledBuffer d = pool.Take(4000);  // only the 5000-byte one fits
  EXPECT_EQ(d.data.get(), b_mem);
  EXPECT_EQ(pool.spare_buffers(), 0u);
  PooledBuffer e = pool.Take(9000);  // none left: a new one
  EXPECT_NE(e.data, nullptr);
  EXPECT_EQ(e.capacity, 9000u);
  EXPECT_EQ(pool.spare_buffers(), 0u);
}

TEST(BufferPool, MovedFromBuffersAreNotKept) {
  BufferPool pool;
  PooledBuffer a = pool.Take(1000);
  PooledBuffer b = std::move(a);
  pool.Give(std::move(a));  // NOLINT(bugprone-use-after-move): the case under test
  EXPECT_EQ(pool.spare_buffers(), 0u);
  pool.Give(std::move(b));
  EXPECT_EQ(pool.spare_buffers(), 1u);
  PooledBuffer c = pool.Take(10);
  EXPECT_NE(c.data, nullptr);
}

TEST(BufferPool, EmptyBuffersNeedNoMemory) {
  BufferPool pool;
  PooledBuffer z = pool.Take(0);
  EXPECT_EQ(z.bytes, 0u);
  EXPECT_EQ(z.capacity, 0u);
  pool.Give(std::move(z));
  EXPECT_EQ(pool.spare_buffers(), 0u);
}

TEST(BufferPool, FullPoolKeepsTheLargestBuffers) {
  BufferPool pool(/*max_buffers=*/2, /*max_bytes=*/10000);
  BufferPool maker;  // new buffers of exact sizes
  pool.Give(maker.Take(100));
  pool.Give(maker.Take(3000));
  pool.Give(maker.Take(200));  // full by count: the 100 goes, 200 stays
  EXPECT_EQ(pool.spare_buffers(), 2u);
  EXPECT_EQ(pool.spare_bytes(), 3200u);
  pool.Give(maker.Take(50));  // smaller than everything kept: dropped
  EXPECT_EQ(pool.spare_bytes(), 3200u);
  pool.Give(maker.Take(20000));  // larger than the whole cap: dropped, nothing evicted
  EXPECT_EQ(pool.spare_bytes(), 3200u);
  pool.Give(maker.Take(9000));  // over the byte cap with the others: they go
  EXPECT_EQ(pool.spare_buffers(), 1u);
  EXPECT_EQ(pool.spare_bytes(), 9000u);
}

TEST(BufferPool, DropsNothingWhenItCannotMakeRoom) {
  BufferPool pool(/*max_buffers=*/4, /*max_bytes=*/10000);
  BufferPool maker;
  pool.Give(maker.Take(6000));
  pool.Give(maker.Take(3000));
  // 4500 fits only if the 6000 went too, which is larger: keep both spares.
  pool.Give(maker.Take(4500));
  EXPECT_EQ(pool.spare_buffers(), 2u);
  EXPECT_EQ(pool.spare_bytes(), 9000u);
  // 4000 fits once the 3000 goes.
  pool.Give(maker.Take(4000));
  EXPECT_EQ(pool.spare_buffers(), 2u);
  EXPECT_EQ(pool.spare_bytes(), 10000u);
}

}  // namespace
}  // namespace hora
