// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "support/fake_control_plane.h"

#include <cstdio>
#include <cstring>

namespace hora::testing {

class FakeControlWorld::Plane final : public ControlPlane {
 public:
  Plane(FakeControlWorld& world, int rank) : w_(world), rank_(rank) {}

  int rank() const override { return rank_; }
  int size() const override { return w_.size_; }

  Status And(std::span<uint64_t> words) override {
    if (rank_ == 0) ++w_.calls_.ands;
    return AndOf(words).status();
  }

  bool CanCarry(size_t words, size_t bytes) override {
    (void)words, (void)bytes;
    return w_.carry_;
  }

  Result<bool> AndCarrying(std::span<uint64_t> words, const CarriedAllreduce* carried) override {
    if (rank_ == 0) {
      ++w_.calls_.ands;
      if (carried != nullptr) ++w_.calls_.carried_ands;
    }
    // What this rank carries: [count, op, prescale, postscale] (count
    // SIZE_MAX: nothing), then its float32 data.
    std::vector<uint8_t> about(4 * 8, 0);
    uint64_t head[4] = {UINT64_MAX, 0, 0, 0};
    std::vector<float> data;
    if (carried != nullptr && carried->dtype == DataType::kFloat32 &&
        carried->reduction.op == ReduceOp::kSum) {
      for (const AllreducePart& p : carried->parts) {
        const auto* in = static_cast<const float*>(p.in);
        data.insert(data.end(), in, in + p.count);
      }
      head[0] = data.size();
      head[1] = static_cast<uint64_t>(carried->reduction.op);
      std::memcpy(&head[2], &carried->reduction.prescale_factor, 8);
      std::memcpy(&head[3], &carried->reduction.postscale_factor, 8);
    }
    std::memcpy(about.data(), head, sizeof head);
    const size_t compared = words.empty() ? 0 : words.size_bytes() - 8;
    std::vector<uint8_t> mine(words.size_bytes() + about.size() + data.size() * 4);
    std::memcpy(mine.data(), words.data(), words.size_bytes());
    std::memcpy(mine.data() + words.size_bytes(), about.data(), about.size());
    if (!data.empty()) {
      std::memcpy(mine.data() + words.size_bytes() + about.size(), data.data(), data.size() * 4);
    }
    Status fail;
    const auto all = w_.Exchange(rank_, mine, &fail);
    if (!fail.ok()) return fail;
    bool all_carry = head[0] != UINT64_MAX;
    for (const auto& other : all) {
      all_carry = all_carry && other.size() == mine.size() &&
                  std::memcmp(other.data(), mine.data(), compared) == 0 &&
                  std::memcmp(other.data() + words.size_bytes(), about.data(), about.size()) == 0;
    }
    for (const auto& other : all) {
      for (size_t i = 0; i < words.size(); ++i) {
        uint64_t v;
        std::memcpy(&v, other.data() + i * 8, 8);
        words[i] &= v;
      }
    }
    if (!all_carry) return false;
    if (rank_ == 0) ++w_.calls_.carried_runs;
    std::vector<float> sum(data.size(), 0.0f);
    for (const auto& other : all) {  // in rank order: every rank sums alike
      const uint8_t* at = other.data() + words.size_bytes() + about.size();
      for (size_t i = 0; i < sum.size(); ++i) {
        float v;
        std::memcpy(&v, at + i * 4, 4);
        sum[i] += v;
      }
    }
    size_t at = 0;
    for (const AllreducePart& p : carried->parts) {
      std::memcpy(p.out, sum.data() + at, p.count * 4);
      at += p.count;
    }
    return true;
  }

  std::optional<bool> PeerWaiting(size_t words) const override {
    (void)words;
    return std::nullopt;
  }

  Result<std::vector<std::vector<uint8_t>>> Gather(int root,
                                                   const std::vector<uint8_t>& mine) override {
    if (rank_ == 0) ++w_.calls_.gathers;
    Status fail;
    auto all = w_.Exchange(rank_, mine, &fail);
    if (!fail.ok()) return fail;
    if (rank_ != root) all.clear();
    return all;
  }

  Status Broadcast(int root, std::vector<uint8_t>& data) override {
    if (rank_ == 0) ++w_.calls_.broadcasts;
    Status fail;
    auto all = w_.Exchange(rank_, data, &fail);
    if (!fail.ok()) return fail;
    data = all[static_cast<size_t>(root)];
    return Status::Ok();
  }

  void SetSubject(std::function<std::string()> subject) override { subject_ = std::move(subject); }

 private:
  Result<bool> AndOf(std::span<uint64_t> words) {
    std::vector<uint8_t> mine(words.size_bytes());
    std::memcpy(mine.data(), words.data(), words.size_bytes());
    Status fail;
    const auto all = w_.Exchange(rank_, mine, &fail);
    if (!fail.ok()) return fail;
    for (const auto& other : all) {
      for (size_t i = 0; i < words.size(); ++i) {
        uint64_t v;
        std::memcpy(&v, other.data() + i * 8, 8);
        words[i] &= v;
      }
    }
    return false;
  }

  FakeControlWorld& w_;
  const int rank_;
  std::function<std::string()> subject_;
};

FakeControlWorld::FakeControlWorld(int size)
    : size_(size),
      here_(static_cast<size_t>(size), false),
      slots_(static_cast<size_t>(size)),
      done_(static_cast<size_t>(size)) {
  for (int r = 0; r < size; ++r) planes_.push_back(std::make_unique<Plane>(*this, r));
}

FakeControlWorld::~FakeControlWorld() = default;

ControlPlane& FakeControlWorld::plane(int rank) { return *planes_[static_cast<size_t>(rank)]; }

void FakeControlWorld::FailNextCall(Status status) {
  std::lock_guard<std::mutex> lock(mu_);
  fail_next_ = std::move(status);
}

FakeControlWorld::Calls FakeControlWorld::calls() const {
  std::lock_guard<std::mutex> lock(mu_);
  return calls_;
}

namespace {

std::string SecondsText(Duration d) {
  char text[32];
  std::snprintf(text, sizeof text, "%g s", DurationToSeconds(d));
  return text;
}

}  // namespace

std::vector<std::vector<uint8_t>> FakeControlWorld::Exchange(int rank, std::vector<uint8_t> mine,
                                                             Status* fail) {
  std::unique_lock<std::mutex> lock(mu_);
  const uint64_t gen = generation_;
  const auto me = static_cast<size_t>(rank);
  slots_[me] = std::move(mine);
  here_[me] = true;
  if (++arrived_ == size_) {
    done_ = slots_;
    call_fail_ = fail_next_;  // every rank of this call sees it; the next goes on
    fail_next_ = Status::Ok();
    arrived_ = 0;
    here_.assign(here_.size(), false);
    ++generation_;
    cv_.notify_all();
  } else if (!cv_.wait_for(lock, timeout_, [&] { return generation_ != gen; })) {
    std::string missing;
    for (size_t r = 0; r < here_.size(); ++r) {
      if (!here_[r]) missing += (missing.empty() ? "" : ", ") + std::to_string(r);
    }
    --arrived_;
    here_[me] = false;
    *fail =
        TimeoutError("fake control plane: rank " + std::to_string(rank) + " waited " +
                     SecondsText(timeout_) + " for rank(s) " + missing + " to make the same call");
    return {};
  }
  *fail = call_fail_;
  return done_;
}

}  // namespace hora::testing
