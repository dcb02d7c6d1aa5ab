// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// Elastic worlds re-formed in place: workers are threads of this test, each
// with Sessions of its own that find their place through a real store
// (TcpStoreServer) and ElasticDriver, as horarun's elastic mode runs them
// (docs/dev/elastic.md). The worlds: 3 workers; one leaves, the other two
// re-form a world of 2; a new worker joins, a world of 3; two leave, and
// the last one's init() ends with the driver's reason after the timeout.
#include <gtest/gtest.h>

#include <atomic>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "elastic_driver.h"
#include "hora/elastic.h"
#include "hora/session.h"
#include "launch/elastic_place.h"
#include "store/tcp_store_client.h"
#include "store/tcp_store_server.h"

namespace hora::horarun {
namespace {

using Clock = ElasticPlanner::Clock;

// A store, a driver polling it on a thread of its own, and the settings a
// worker's Session gets.
class ElasticJob {
 public:
  explicit ElasticJob(ElasticPlanner::Settings settings)
      : timeout_s_(std::chrono::duration<double>(settings.timeout).count()) {
    Logger logger(LogLevel::kOff, -1);
    auto server = TcpStoreServer::Start("127.0.0.1", 0, kSecret, logger);
    EXPECT_TRUE(server.ok()) << server.status().ToString();
    server_ = std::move(*server);
    addr_ = "127.0.0.1:" + std::to_string(server_->port());
    auto client =
        TcpStoreClient::Connect(*net::ParseHostPort(addr_), kSecret, std::chrono::seconds(10));
    EXPECT_TRUE(client.ok()) << client.status().ToString();
    store_ = std::move(*client);
    driver_ = std::make_unique<ElasticDriver>(*store_, kJob, settings);
    poller_ = std::thread([this] {
      while (!done_) {
        {
          std::lock_guard<std::mutex> lock(mu_);
          auto d = driver_->Poll(Clock::now());
          EXPECT_TRUE(d.ok()) << d.status().ToString();
          if (d.ok() && d->end) ended_ = *d->end;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
    });
  }
  ~ElasticJob() {
    done_ = true;
    poller_.join();
  }

  void Started(const std::string& id) {
    std::lock_guard<std::mutex> lock(mu_);
    driver_->Started(id, "localhost", Clock::now());
  }
  void Ended(const std::string& id) {
    std::lock_guard<std::mutex> lock(mu_);
    driver_->Ended(id, Clock::now());
  }
  // What horarun does when its discovery script names a new slot, once it
  // has started the worker there.
  void HostsAdded() {
    std::lock_guard<std::mutex> lock(mu_);
    const Status st = driver_->CountHostUpdates(true, false);
    EXPECT_TRUE(st.ok()) << st.ToString();
  }
  // What horarun does when a slot of worker `id`, in no world, is gone: it
  // stops the worker, then counts the update.
  void SlotGone(const std::string& id) {
    std::lock_guard<std::mutex> lock(mu_);
    driver_->Ended(id, Clock::now());
    const Status st = driver_->CountHostUpdates(false, true);
    EXPECT_TRUE(st.ok()) << st.ToString();
  }
  // Until worker `id` has come to init() `n` times.
  void AwaitArrival(const std::string& id, int64_t n) {
    for (;;) {
      Result<int64_t> seen = [&] {
        std::lock_guard<std::mutex> lock(mu_);
        return store_->Add(ElasticArrivalKey(kJob, id), 0);
      }();
      ASSERT_TRUE(seen.ok()) << seen.status().ToString();
      if (*seen >= n) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  }
  Result<std::unique_ptr<Session>> Init(const std::string& id) const {
    return Session::Create(Options(id));
  }
  // A worker's settings; its wait for a place follows the planner's timeout.
  SessionOptions Options(const std::string& id) const {
    SessionOptions o;
    o.read_environment = false;
    o.settings = {
        {"HORA_STORE_ADDR", addr_}, {"HORA_SECRET", kSecret},
        {"HORA_JOB_ID", kJob},      {"HORA_WORKER_ID", id},
        {"HORA_TRANSPORT", "tcp"},  {"HORA_PEER_TIMEOUT_S", "2"},
        {"HORA_LOG_LEVEL", "off"},  {"HORA_ELASTIC_TIMEOUT_S", std::to_string(timeout_s_)}};
    return o;
  }

 private:
  static constexpr const char* kSecret = "elastic-test-secret";
  static constexpr const char* kJob = "elastictest";
  const double timeout_s_;
  std::unique_ptr<TcpStoreServer> server_;
  std::unique_ptr<TcpStoreClient> store_;
  std::string addr_;
  std::mutex mu_;
  std::unique_ptr<ElasticDriver> driver_;
  std::atomic<bool> done_{false};
  std::string ended_;
  std::thread poller_;
};

// Every rank's rank + 1, summed: size * (size + 1) / 2 everywhere.
Status CheckWorld(Session& s, int want_size) {
  if (s.size() != want_size) {
    return InternalError("a world of " + std::to_string(s.size()) + ", not " +
                         std::to_string(want_size));
  }
  float v = static_cast<float>(s.rank() + 1);
  HORA_RETURN_IF_ERROR(s.Allreduce(TensorView(&v, DataType::kFloat32, {1}),
                                   TensorView(&v, DataType::kFloat32, {1}), {ReduceOp::kSum}));
  const float want = static_cast<float>(want_size * (want_size + 1) / 2);
  if (v != want)
    return InternalError("sum " + std::to_string(v) + ", want " + std::to_string(want));
  return Status::Ok();
}

void RunThreads(const std::vector<std::function<void()>>& fns) {
  std::vector<std::thread> threads;
  for (const auto& fn : fns) threads.emplace_back(fn);
  for (auto& t : threads) t.join();
}

TEST(ElasticWorlds, WorkersLeaveAndJoinAndTheWorldIsReformedInPlace) {
  ElasticPlanner::Settings settings;
  settings.min_np = 2;
  settings.max_np = 4;
  settings.timeout = std::chrono::seconds(2);
  ElasticJob job(settings);
  for (const char* id : {"w0", "w1", "w2"}) job.Started(id);
  std::unique_ptr<Session> s[4];
  std::vector<int> rank(4, -1);
  // Generation 1: three workers.
  RunThreads({[&] {
                auto r = job.Init("w0");
                ASSERT_TRUE(r.ok()) << r.status().ToString();
                s[0] = std::move(*r);
              },
              [&] {
                auto r = job.Init("w1");
                ASSERT_TRUE(r.ok()) << r.status().ToString();
                s[1] = std::move(*r);
              },
              [&] {
                auto r = job.Init("w2");
                ASSERT_TRUE(r.ok()) << r.status().ToString();
                s[2] = std::move(*r);
              }});
  ASSERT_TRUE(s[0] && s[1] && s[2]);
  EXPECT_EQ(s[0]->rank(), 0);
  EXPECT_EQ(s[1]->rank(), 1);
  EXPECT_EQ(s[2]->rank(), 2);
  RunThreads({[&] { EXPECT_TRUE(CheckWorld(*s[0], 3).ok()); },
              [&] { EXPECT_TRUE(CheckWorld(*s[1], 3).ok()); },
              [&] { EXPECT_TRUE(CheckWorld(*s[2], 3).ok()); }});

  // w2 leaves; the others' next collective fails, and they re-form a world
  // of 2 in place.
  s[2].reset();
  job.Ended("w2");
  auto survive = [&](int w) {
    float v = 1;
    const Status lost = s[w]->Allreduce(TensorView(&v, DataType::kFloat32, {1}),
                                        TensorView(&v, DataType::kFloat32, {1}), {ReduceOp::kSum});
    EXPECT_FALSE(lost.ok()) << "worker " << w << ": a collective with a worker gone";
    s[w].reset();
    auto r = job.Init("w" + std::to_string(w));
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    s[w] = std::move(*r);
    EXPECT_TRUE(CheckWorld(*s[w], 2).ok());
  };
  RunThreads({[&] { survive(0); }, [&] { survive(1); }});
  ASSERT_TRUE(s[0] && s[1]);
  EXPECT_EQ(s[0]->rank(), 0);
  EXPECT_EQ(s[1]->rank(), 1);

  // w3 joins: it waits in init() until the others come (at their next
  // commit, in a script); then a world of 3, w3 last.
  job.Started("w3");
  auto rejoin = [&](int w) {
    s[w].reset();
    auto r = job.Init("w" + std::to_string(w));
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    s[w] = std::move(*r);
    EXPECT_TRUE(CheckWorld(*s[w], 3).ok());
  };
  RunThreads({[&] { rejoin(0); }, [&] { rejoin(1); }, [&] { rejoin(3); }});
  ASSERT_TRUE(s[0] && s[1] && s[3]);
  EXPECT_EQ(s[0]->rank(), 0);
  EXPECT_EQ(s[1]->rank(), 1);
  EXPECT_EQ(s[3]->rank(), 2);

  // w1 and w3 leave: one worker, fewer than --min-np 2. Its init() ends
  // after the timeout, naming why.
  s[1].reset();
  s[3].reset();
  job.Ended("w1");
  job.Ended("w3");
  s[0].reset();
  const auto start = Clock::now();
  auto last = job.Init("w0");
  const double waited = std::chrono::duration<double>(Clock::now() - start).count();
  ASSERT_FALSE(last.ok());
  EXPECT_EQ(last.status().code(), StatusCode::kAborted) << last.status().ToString();
  EXPECT_NE(last.status().message().find("only 1 worker(s) left, fewer than --min-np 2"),
            std::string::npos)
      << last.status().ToString();
  EXPECT_LT(waited, 10.0) << "the end came long after the 2 s timeout";
}

// A trainer's own state through hora::RunElastic: 4 weights, the step, and
// the world size of each committed step.
struct Trainer : ElasticState {
  std::vector<float> w = std::vector<float>(4, 0.0f), saved_w = w;
  int64_t step = 0, saved_step = 0;
  std::vector<int32_t> sizes, saved_sizes;
  std::vector<int> resets;
  Status Save() override {
    saved_w = w;
    saved_step = step;
    saved_sizes = sizes;
    return Status::Ok();
  }
  Status Restore() override {
    w = saved_w;
    step = saved_step;
    sizes = saved_sizes;
    return Status::Ok();
  }
  Status Sync(Session& s) override {
    HORA_RETURN_IF_ERROR(s.Broadcast(TensorView(w.data(), DataType::kFloat32, {4}), 0));
    HORA_RETURN_IF_ERROR(s.Broadcast(TensorView(&step, DataType::kInt64, {1}), 0));
    sizes.resize(static_cast<size_t>(step));
    return s.Broadcast(TensorView(sizes.data(), DataType::kInt32, {step}), 0);
  }
  void Reset(Session& s) override { resets.push_back(s.size()); }
  // A step's first half: weight i gains the mean over ranks of
  // (rank + 1) * (i + 1).
  Status AddMeanGradient(Session& s) {
    std::vector<float> g(4);
    for (size_t i = 0; i < g.size(); ++i) {
      g[i] = static_cast<float>((s.rank() + 1) * static_cast<int>(i + 1));
    }
    HORA_RETURN_IF_ERROR(s.Allreduce(TensorView(g.data(), DataType::kFloat32, {4}),
                                     TensorView(g.data(), DataType::kFloat32, {4}),
                                     {ReduceOp::kAverage}));
    for (size_t i = 0; i < g.size(); ++i) w[i] += g[i];
    return Status::Ok();
  }
};

// --min-np 2 --max-np 3, a 10 s --elastic-timeout.
ElasticPlanner::Settings TwoToThree() {
  ElasticPlanner::Settings settings;
  settings.min_np = 2;
  settings.max_np = 3;
  settings.timeout = std::chrono::seconds(10);
  return settings;
}

// Each step adds to weight i the mean over ranks of (rank + 1) * (i + 1): a
// replay of the committed sizes gives the weights.
std::vector<float> Replay(const std::vector<int32_t>& sizes) {
  std::vector<float> w(4, 0.0f);
  for (int32_t n : sizes) {
    for (size_t i = 0; i < w.size(); ++i) {
      w[i] +=
          static_cast<float>(n * (n + 1) / 2) * static_cast<float>(i + 1) / static_cast<float>(n);
    }
  }
  return w;
}

// w2 leaves in step 5 (its RunElastic returns, ending its Session); the
// others' step 5 fails after it changed their weights, they roll back to
// step 4's commit, go on in a world of 2, and end with every step committed
// once and the weights of a replay (a mutant without the roll back fails).
TEST(ElasticWorlds, RunElasticRollsBackAndGoesOnInANewWorld) {
  ElasticJob job(TwoToThree());
  for (const char* id : {"w0", "w1", "w2"}) job.Started(id);
  Trainer trainers[3];
  Status results[3];
  auto work = [&](int k) {
    Trainer& t = trainers[k];
    results[k] = RunElastic(job.Options("w" + std::to_string(k)), t,
                            [&](Session& s, ElasticState& st) -> Status {
                              while (t.step < 10) {
                                HORA_RETURN_IF_ERROR(t.AddMeanGradient(s));
                                // w2 leaves between the step's two collectives: the others have
                                // changed their weights, and must roll them back.
                                if (k == 2 && t.step == 5) return InvalidArgument("w2 leaves");
                                float one = 1;
                                const TensorView loss(&one, DataType::kFloat32, {1});
                                HORA_RETURN_IF_ERROR(s.Allreduce(loss, loss, {ReduceOp::kSum}));
                                t.sizes.push_back(s.size());
                                ++t.step;
                                HORA_RETURN_IF_ERROR(st.Commit());
                              }
                              return Status::Ok();
                            });
    if (k == 2) job.Ended("w2");
  };
  RunThreads({[&] { work(0); }, [&] { work(1); }, [&] { work(2); }});
  EXPECT_EQ(results[2].code(), StatusCode::kInvalidArgument) << results[2].ToString();
  const std::vector<int32_t> want_sizes = {3, 3, 3, 3, 3, 2, 2, 2, 2, 2};
  for (int k : {0, 1}) {
    ASSERT_TRUE(results[k].ok()) << "w" << k << ": " << results[k].ToString();
    EXPECT_EQ(trainers[k].sizes, want_sizes) << "w" << k;
    EXPECT_EQ(trainers[k].w, Replay(want_sizes)) << "w" << k;
    EXPECT_EQ(trainers[k].resets, std::vector<int>{2}) << "w" << k;
  }
}

// A worker added (horarun's discovery): the members find the host update at
// a commit (ElasticState::Commit(session)), reset without restoring, and go
// on with the new worker, which syncs from rank 0, in a world of 3.
TEST(ElasticWorlds, ACommitTakesInAWorkerAddedToTheJob) {
  ElasticJob job(TwoToThree());
  for (const char* id : {"w0", "w1"}) job.Started(id);
  Trainer trainers[3];
  Status results[3];
  std::thread joiner;
  std::function<void(int)> work = [&](int k) {
    Trainer& t = trainers[k];
    results[k] = RunElastic(
        job.Options("w" + std::to_string(k)), t, [&](Session& s, ElasticState& st) -> Status {
          while (t.step < 10) {
            HORA_RETURN_IF_ERROR(t.AddMeanGradient(s));
            t.sizes.push_back(s.size());
            ++t.step;
            if (k == 0 && t.step == 3 && !joiner.joinable()) {
              job.Started("w2");  // (horarun starts the worker, then counts the update)
              joiner = std::thread([&] { work(2); });
              job.HostsAdded();
            }
            HORA_RETURN_IF_ERROR(st.Commit(s));
          }
          return Status::Ok();
        });
  };
  RunThreads({[&] { work(0); }, [&] { work(1); }});
  if (joiner.joinable()) joiner.join();
  const std::vector<int32_t> want_sizes = {2, 2, 2, 3, 3, 3, 3, 3, 3, 3};
  for (int k : {0, 1, 2}) {
    ASSERT_TRUE(results[k].ok()) << "w" << k << ": " << results[k].ToString();
    EXPECT_EQ(trainers[k].sizes, want_sizes) << "w" << k;
    EXPECT_EQ(trainers[k].w, Replay(want_sizes)) << "w" << k;
  }
  EXPECT_EQ(trainers[0].resets, std::vector<int>{3});
  EXPECT_EQ(trainers[1].resets, std::vector<int>{3});
  EXPECT_TRUE(trainers[2].resets.empty());
}

// A slot gone while a world forms, counted after a member read the
// counters in init() but before the world formed without its worker: the
// world knows it (its place says the counts it was formed after), and
// nobody resets for it at a commit (a second reset before).
TEST(ElasticWorlds, AnUpdateCountedBeforeTheWorldFormedCausesNoReset) {
  ElasticJob job(TwoToThree());
  for (const char* id : {"w0", "w1", "w2"}) job.Started(id);
  Trainer trainers[2];
  Status results[2];
  auto work = [&](int k) {
    Trainer& t = trainers[k];
    results[k] = RunElastic(job.Options("w" + std::to_string(k)), t,
                            [&](Session& s, ElasticState& st) -> Status {
                              while (t.step < 6) {
                                HORA_RETURN_IF_ERROR(t.AddMeanGradient(s));
                                t.sizes.push_back(s.size());
                                ++t.step;
                                HORA_RETURN_IF_ERROR(st.Commit(s));
                              }
                              return Status::Ok();
                            });
  };
  std::thread first([&] { work(0); });
  job.AwaitArrival("w0", 1);  // (w0 has read the counters: 0 and 0)
  job.SlotGone("w2");
  std::thread second([&] { work(1); });
  first.join();
  second.join();
  const std::vector<int32_t> want_sizes(6, 2);
  for (int k : {0, 1}) {
    ASSERT_TRUE(results[k].ok()) << "w" << k << ": " << results[k].ToString();
    EXPECT_EQ(trainers[k].sizes, want_sizes) << "w" << k;
    EXPECT_EQ(trainers[k].w, Replay(want_sizes)) << "w" << k;
    EXPECT_TRUE(trainers[k].resets.empty()) << "w" << k << " reset for an update its world had";
  }
}

}  // namespace
}  // namespace hora::horarun
