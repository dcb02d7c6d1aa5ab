// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
// Ranks (threads here) meeting in one store compare the settings that must
// agree: every rank gets the same verdict, naming each setting that differs
// and each rank's value.
#include "api/settings_agreement.h"

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <thread>
#include <vector>

#include "api/session_impl.h"
#include "common/config.h"
#include "hora/session.h"
#include "hora/thread_world.h"
#include "store/memory_store.h"
#include "support/forwarding_store.h"

namespace hora {
namespace {

std::vector<Status> Compare(const std::vector<NamedValues>& by_rank, Duration timeout) {
  auto store = std::make_shared<MemoryStore>();
  std::vector<Status> out(by_rank.size());
  std::vector<std::thread> ranks;
  for (size_t r = 0; r < by_rank.size(); ++r) {
    ranks.emplace_back([&, r] {
      out[r] = CompareSettings(*store, "hora/t", static_cast<int>(r),
                               static_cast<int>(by_rank.size()), by_rank[r], timeout);
    });
  }
  for (auto& t : ranks) t.join();
  return out;
}

NamedValues Settings(std::map<std::string, std::string> env) {
  Result<Config> c = ConfigFromEnv(env);
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return AgreedSettings(*c);
}

TEST(SettingsAgreement, RanksThatAgreeStart) {
  for (int n : {1, 2, 5}) {
    std::vector<NamedValues> all(static_cast<size_t>(n), Settings({{"HORA_TIMEOUT_S", "3"}}));
    // (A setting that need not agree may differ.)
    if (n > 1) all[1] = Settings({{"HORA_TIMEOUT_S", "7"}, {"HORA_LOG_LEVEL", "info"}});
    for (const Status& st : Compare(all, std::chrono::seconds(10))) {
      EXPECT_TRUE(st.ok()) << n << ": " << st.ToString();
    }
  }
}

TEST(SettingsAgreement, EveryRankNamesEachSettingAndValue) {
  std::vector<NamedValues> all(3, Settings({}));
  all[1] = Settings({{"HORA_ALLREDUCE_ALGO", "ring"}, {"HORA_CACHE_CAPACITY", "64"}});
  all[2] = Settings({{"HORA_CACHE_CAPACITY", "1K"}});  // (1024, the default: agrees with 0)
  const std::vector<Status> got = Compare(all, std::chrono::seconds(10));
  for (size_t r = 0; r < got.size(); ++r) {
    ASSERT_FALSE(got[r].ok()) << r;
    const std::string& m = got[r].message();
    EXPECT_EQ(m.rfind("rank " + std::to_string(r) + ": ranks disagree", 0), 0u) << m;
    EXPECT_NE(m.find("HORA_ALLREDUCE_ALGO is '' on ranks 0, 2 and 'ring' on rank 1"),
              std::string::npos)
        << m;
    EXPECT_NE(m.find("HORA_CACHE_CAPACITY is '1024' on ranks 0, 2 and '64' on rank 1"),
              std::string::npos)
        << m;
    EXPECT_EQ(m.find("HORA_TRANSPORT"), std::string::npos) << m;
  }
}

// A fact of each host compared with the settings (whether its kernel takes
// HORA_TCP_CONGESTION): the verdict names the ranks on each side, and says
// the hosts need it too.
TEST(SettingsAgreement, AHostFactThatDiffersNamesItsRanks) {
  std::vector<NamedValues> all(3, Settings({{"HORA_TCP_CONGESTION", "cubic"}}));
  for (size_t r = 0; r < all.size(); ++r) {
    all[r].emplace_back("HORA_TCP_CONGESTION on this host", r == 2 ? "refused: no" : "usable");
  }
  for (const Status& st : Compare(all, std::chrono::seconds(10))) {
    ASSERT_FALSE(st.ok());
    EXPECT_NE(st.message().find("HORA_TCP_CONGESTION on this host is 'usable' on ranks 0, 1 "
                                "and 'refused: no' on rank 2"),
              std::string::npos)
        << st.message();
    EXPECT_NE(st.message().find("and every host what it needs"), std::string::npos) << st.message();
  }
}

// How GPU tensors are routed (NCCL or not, from which size, the staging
// chunk) is the Session's, not each request's: ranks that differ fail here,
// before any GPU batch could go two ways.
TEST(SettingsAgreement, GpuRoutingIsAgreedWhenTheSessionIsMade) {
  std::vector<NamedValues> all(2, Settings({}));
  all[1] = Settings({{"HORA_GPU_BACKEND", "nccl"},
                     {"HORA_NCCL_MIN_BYTES", "8K"},
                     {"HORA_STAGING_CHUNK_BYTES", "0"}});
  for (const Status& st : Compare(all, std::chrono::seconds(10))) {
    ASSERT_FALSE(st.ok());
    const std::string& m = st.message();
    EXPECT_NE(m.find("HORA_GPU_BACKEND is 'auto' on rank 0 and 'nccl' on rank 1"),
              std::string::npos)
        << m;
    EXPECT_NE(m.find("HORA_NCCL_MIN_BYTES is '262144' on rank 0 and '8192' on rank 1"),
              std::string::npos)
        << m;
    EXPECT_NE(m.find("HORA_STAGING_CHUNK_BYTES is '4194304' on rank 0 and '0' on rank 1"),
              std::string::npos)
        << m;
  }
  // HORA_BACKEND=nccl is HORA_GPU_BACKEND=nccl: the two agree.
  all[0] = Settings({{"HORA_BACKEND", "nccl"}});
  all[1] = Settings({{"HORA_GPU_BACKEND", "nccl"}});
  for (const Status& st : Compare(all, std::chrono::seconds(10))) {
    EXPECT_TRUE(st.ok()) << st.ToString();
  }
}

// Ranks with no store (MPI's transport or backend) compare over their
// backend: every rank reaches the same verdict. (Here ranks as threads, over
// Hora's backend on the loopback transport.)
TEST(SettingsAgreement, OverTheBackendEveryRankGetsTheVerdict) {
  for (const bool differ : {false, true}) {
    const int n = 3;
    auto world = ThreadWorld::Create(n);
    std::vector<Status> got(n);
    std::vector<std::thread> ranks;
    for (int r = 0; r < n; ++r) {
      ranks.emplace_back([&, r] {
        SessionOptions options;
        options.rank = r;
        options.world = world;
        options.read_environment = false;
        auto session = Session::Create(options);
        if (!session.ok()) {
          got[static_cast<size_t>(r)] = session.status();
          return;
        }
        std::map<std::string, std::string> env;
        if (differ && r == 2) env["HORA_FUSION_THRESHOLD_BYTES"] = "1M";
        got[static_cast<size_t>(r)] =
            CompareSettingsOver(*(*session)->impl().backend, r, n, Settings(env));
      });
    }
    for (auto& t : ranks) t.join();
    for (int r = 0; r < n; ++r) {
      const Status& st = got[static_cast<size_t>(r)];
      if (!differ) {
        EXPECT_TRUE(st.ok()) << r << ": " << st.ToString();
        continue;
      }
      ASSERT_FALSE(st.ok()) << r;
      EXPECT_EQ(st.message(), "rank " + std::to_string(r) +
                                  ": ranks disagree on settings every rank must share: "
                                  "HORA_FUSION_THRESHOLD_BYTES is '67108864' on ranks 0, 1 and "
                                  "'1048576' on rank 2 (give every rank the same environment)");
    }
  }
}

TEST(SettingsDisagreement, ListsEachValueWithItsRanks) {
  const std::vector<NamedValues> all = {{{"A", "x"}, {"B", "1"}},
                                        {{"A", "y"}, {"B", "1"}},
                                        {{"A", "z"}, {"B", "1"}},
                                        {{"A", "x"}, {"B", "1"}}};
  EXPECT_EQ(SettingsDisagreement(all), "A is 'x' on ranks 0, 3, 'y' on rank 1 and 'z' on rank 2");
  EXPECT_EQ(SettingsDisagreement({all[0], all[0]}), "");
  EXPECT_EQ(SettingsDisagreement({}), "");
}

TEST(SettingsAgreement, ARankThatNeverComesFailsEveryRankThatDid) {
  auto store = std::make_shared<MemoryStore>();
  // Rank 0 of 3 and rank 1; rank 2 never gives its settings.
  Status zero, one;
  std::thread t1([&] {
    one = CompareSettings(*store, "hora/t", 1, 3, Settings({}), std::chrono::milliseconds(200));
  });
  zero = CompareSettings(*store, "hora/t", 0, 3, Settings({}), std::chrono::milliseconds(200));
  t1.join();
  ASSERT_FALSE(zero.ok());
  ASSERT_FALSE(one.ok());
  EXPECT_NE(zero.message().find("rank 2 never came"), std::string::npos) << zero.message();
  EXPECT_NE(one.message().find("rank 2 never came"), std::string::npos) << one.message();
  // (A world that never formed, which a new one mends: not a disagreement.)
  EXPECT_EQ(zero.code(), StatusCode::kTimeout) << zero.ToString();
  EXPECT_EQ(one.code(), StatusCode::kTimeout) << one.ToString();
}

// A store whose waits for rank 2's key end as an elastic worker's do when
// a member of its forming world ended (api/abortable_store.h).
class BrokenForRankTwo final : public testing::ForwardingStore {
 public:
  Result<Bytes> Get(const std::string& key, Duration timeout) override {
    if (key.ends_with("/settings/2")) return UnavailableError("worker w/2 of world 2 ended");
    return ForwardingStore::Get(key, timeout);
  }
};

TEST(SettingsAgreement, AWorldThatBrokeWhileFormingStaysUnavailableOnEveryRank) {
  auto store = std::make_shared<BrokenForRankTwo>();
  Status zero, one;
  std::thread t1([&] {
    one = CompareSettings(*store, "hora/t", 1, 3, Settings({}), std::chrono::seconds(5));
  });
  zero = CompareSettings(*store, "hora/t", 0, 3, Settings({}), std::chrono::seconds(5));
  t1.join();
  EXPECT_EQ(zero.code(), StatusCode::kUnavailable) << zero.ToString();
  EXPECT_EQ(one.code(), StatusCode::kUnavailable) << one.ToString();
  EXPECT_NE(one.message().find("worker w/2 of world 2 ended"), std::string::npos) << one.message();
}

}  // namespace
}  // namespace hora
