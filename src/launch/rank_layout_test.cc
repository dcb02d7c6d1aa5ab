// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "launch/rank_layout.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace hora {
namespace {

TEST(RankLayout, NoLauncherMeansOneRank) {
  auto l = RankLayoutFromEnv({{"PATH", "/bin"}});
  ASSERT_TRUE(l.ok());
  EXPECT_EQ(l->source, "default");
  EXPECT_EQ(l->size, 1);
  EXPECT_EQ(l->rank, 0);
}

TEST(RankLayout, HorarunVariablesWinOverOthers) {
  auto l = RankLayoutFromEnv({{"HORA_RANK", "5"},
                              {"HORA_SIZE", "8"},
                              {"HORA_LOCAL_RANK", "1"},
                              {"HORA_LOCAL_SIZE", "4"},
                              {"HORA_CROSS_RANK", "1"},
                              {"HORA_CROSS_SIZE", "2"},
                              {"RANK", "0"},
                              {"WORLD_SIZE", "2"}});
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  EXPECT_EQ(l->source, "horarun");
  EXPECT_EQ(l->rank, 5);
  EXPECT_EQ(l->local_rank, 1);
  EXPECT_EQ(l->local_size, 4);
  EXPECT_EQ(l->cross_rank, 1);
  EXPECT_EQ(l->cross_size, 2);
}

TEST(RankLayout, OpenMpiDerivesCrossFromLocal) {
  auto l = RankLayoutFromEnv({{"OMPI_COMM_WORLD_RANK", "6"},
                              {"OMPI_COMM_WORLD_SIZE", "8"},
                              {"OMPI_COMM_WORLD_LOCAL_RANK", "2"},
                              {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"}});
  ASSERT_TRUE(l.ok());
  EXPECT_EQ(l->source, "openmpi");
  EXPECT_EQ(l->cross_rank, 1);
  EXPECT_EQ(l->cross_size, 2);
}

TEST(RankLayout, MpichAndTorchrun) {
  auto m = RankLayoutFromEnv(
      {{"PMI_RANK", "1"}, {"PMI_SIZE", "3"}, {"MPI_LOCALRANKID", "1"}, {"MPI_LOCALNRANKS", "3"}});
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->source, "mpich");
  EXPECT_EQ(m->local_size, 3);
  EXPECT_EQ(m->cross_size, 1);
  auto t = RankLayoutFromEnv({{"RANK", "2"},
                              {"WORLD_SIZE", "4"},
                              {"LOCAL_RANK", "0"},
                              {"LOCAL_WORLD_SIZE", "2"},
                              {"GROUP_RANK", "1"}});
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->source, "torchrun");
  EXPECT_EQ(t->cross_rank, 1);
  EXPECT_EQ(t->cross_size, 2);
}

TEST(RankLayout, TheNearestLauncherWins) {
  // torchrun started in a Slurm step (srun ... torchrun, or an sbatch
  // script): its workers inherit the step's variables of one task.
  const std::map<std::string, std::string> step = {
      {"SLURM_PROCID", "0"},         {"SLURM_NTASKS", "1"}, {"SLURM_LOCALID", "0"},
      {"SLURM_TASKS_PER_NODE", "1"}, {"SLURM_NODEID", "0"}, {"SLURM_NNODES", "1"}};
  std::map<std::string, std::string> env = step;
  env.insert({{"RANK", "3"},
              {"WORLD_SIZE", "4"},
              {"LOCAL_RANK", "1"},
              {"LOCAL_WORLD_SIZE", "2"},
              {"GROUP_RANK", "1"},
              {"TORCHELASTIC_RUN_ID", "j1"}});
  auto t = RankLayoutFromEnv(env);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->source, "torchrun");
  EXPECT_EQ(t->rank, 3);
  EXPECT_EQ(t->size, 4);
  EXPECT_EQ(t->local_rank, 1);
  EXPECT_EQ(t->cross_rank, 1);
  // The same under an MPI launcher's variables; without TORCHELASTIC_RUN_ID
  // (RANK set by hand beside srun) Slurm's stay.
  env.insert({{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "1"}});
  EXPECT_EQ(RankLayoutFromEnv(env)->source, "torchrun");
  env.erase("TORCHELASTIC_RUN_ID");
  EXPECT_EQ(RankLayoutFromEnv(env)->source, "openmpi");
  env.erase("OMPI_COMM_WORLD_RANK");
  EXPECT_EQ(RankLayoutFromEnv(env)->source, "slurm");

  // srun --mpi=pmi2: PMI_RANK and PMI_SIZE for every task, no Hydra's local
  // variables. Two tasks on one node: Slurm's local rank and size.
  std::map<std::string, std::string> pmi2 = {{"SLURM_PROCID", "1"},  {"SLURM_NTASKS", "2"},
                                             {"SLURM_LOCALID", "1"}, {"SLURM_TASKS_PER_NODE", "2"},
                                             {"SLURM_NODEID", "0"},  {"SLURM_NNODES", "1"},
                                             {"PMI_RANK", "1"},      {"PMI_SIZE", "2"},
                                             {"PMI_FD", "5"}};
  auto p = RankLayoutFromEnv(pmi2);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->source, "slurm");
  EXPECT_EQ(p->local_rank, 1);
  EXPECT_EQ(p->local_size, 2);
  // Another PMI launcher inside an allocation (its ranks not Slurm's tasks):
  // its own layout.
  auto other = pmi2;
  other["PMI_RANK"] = "0";
  EXPECT_EQ(RankLayoutFromEnv(other)->source, "mpich");
  // Hydra (mpirun.mpich) in a Slurm allocation sets its local variables:
  // MPICH's layout.
  pmi2["MPI_LOCALRANKID"] = "1";
  pmi2["MPI_LOCALNRANKS"] = "2";
  EXPECT_EQ(RankLayoutFromEnv(pmi2)->source, "mpich");
}

TEST(RankLayout, SlurmLayoutsPerNode) {
  // Each rank's layout from Slurm's variables, cross rank and size as
  // horarun counts them (ranks of one local rank across the nodes).
  struct Case {
    const char* what;
    const char* procid;
    const char* ntasks;
    const char* localid;
    const char* tasks_per_node;
    const char* step_tasks_per_node;  // null: unset
    const char* nodeid;
    const char* nnodes;
    int local_size, cross_rank, cross_size;
  };
  const Case cases[] = {
      {"even nodes", "3", "4", "1", "2(x2)", nullptr, "1", "2", 2, 1, 2},
      // "2(x2),1": nodes 0 and 1 with 2 tasks, node 2 with 1.
      {"uneven, local rank 0 (on every node)", "4", "5", "0", "2(x2),1", nullptr, "2", "3", 1, 2,
       3},
      // Local rank 1 exists on nodes 0 and 1 only (as horarun places "-H a:2,b:2,c:1").
      {"uneven, local rank 1", "3", "5", "1", "2(x2),1", nullptr, "1", "3", 2, 1, 2},
      {"the step's list wins over the job's", "1", "2", "1", "4", "2", "0", "1", 2, 0, 1},
  };
  for (const Case& c : cases) {
    std::map<std::string, std::string> env = {
        {"SLURM_PROCID", c.procid},   {"SLURM_NTASKS", c.ntasks},
        {"SLURM_LOCALID", c.localid}, {"SLURM_TASKS_PER_NODE", c.tasks_per_node},
        {"SLURM_NODEID", c.nodeid},   {"SLURM_NNODES", c.nnodes}};
    if (c.step_tasks_per_node) env["SLURM_STEP_TASKS_PER_NODE"] = c.step_tasks_per_node;
    auto l = RankLayoutFromEnv(env);
    ASSERT_TRUE(l.ok()) << c.what << ": " << l.status().ToString();
    EXPECT_EQ(l->source, "slurm") << c.what;
    EXPECT_EQ(l->local_size, c.local_size) << c.what;
    EXPECT_EQ(l->cross_rank, c.cross_rank) << c.what;
    EXPECT_EQ(l->cross_size, c.cross_size) << c.what;
  }
}

TEST(RankLayout, InconsistentValuesAreErrorsNamingVariables) {
  auto a = RankLayoutFromEnv({{"HORA_RANK", "4"}, {"HORA_SIZE", "4"}});
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.status().message().find("HORA_RANK=4 is not below HORA_SIZE=4"), std::string::npos)
      << a.status().message();
  auto b = RankLayoutFromEnv({{"RANK", "x"}, {"WORLD_SIZE", "4"}});
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find("RANK='x'"), std::string::npos);
  auto c = RankLayoutFromEnv(
      {{"HORA_RANK", "0"}, {"HORA_SIZE", "4"}, {"HORA_LOCAL_RANK", "3"}, {"HORA_LOCAL_SIZE", "2"}});
  ASSERT_FALSE(c.ok());
}

TEST(RankLayout, SlurmTasksPerNodeLists) {
  struct Case {
    const char* text;
    std::optional<int> node;
    int want;
  };
  const Case cases[] = {
      {"4", 0, 4},         {"4", std::nullopt, 4},     {"4(x2)", 1, 4},       {"2,1", 0, 2},
      {"2,1", 1, 1},       {"2(x2),1", 1, 2},          {"2(x2),1", 2, 1},     {"1,3(x2),2", 2, 3},
      {"1,3(x2),2", 3, 2}, {"3(x3)", std::nullopt, 3}, {"16(x1000)", 999, 16}};
  for (const Case& c : cases) {
    auto got = SlurmTasksOnNode(c.text, c.node);
    ASSERT_TRUE(got.ok()) << c.text << ": " << got.status().ToString();
    EXPECT_EQ(*got, c.want) << c.text << " node " << c.node.value_or(-1);
  }
  const char* malformed[] = {"",      ",",  "2,",   "x",      "2(x)", "2(x2", "2(2)",    "0",
                             "2(x0)", "-1", "2 ,1", "2(x2)x", " 2,1", "+2",   "2(x +3)", "2(x-1)"};
  for (const char* text : malformed) {
    auto got = SlurmTasksOnNode(text, 0);
    ASSERT_FALSE(got.ok()) << "'" << text << "' was taken as " << *got;
    EXPECT_NE(got.status().message().find(std::string("SLURM_TASKS_PER_NODE='") + text + "'"),
              std::string::npos)
        << got.status().message();
  }
  auto past = SlurmTasksOnNode("2(x2),1", 3);
  ASSERT_FALSE(past.ok());
  EXPECT_NE(past.status().message().find("3 node(s); SLURM_NODEID=3"), std::string::npos)
      << past.status().message();
  auto uneven = SlurmTasksOnNode("2,1", std::nullopt);
  ASSERT_FALSE(uneven.ok());
  EXPECT_NE(uneven.status().message().find("SLURM_NODEID"), std::string::npos);
}

// CompleteLayout against the hosts themselves: every way of placing up to
// 7 ranks on hosts (each rank's host a label, in first-use order). The
// reference counts hosts, not ranks: the hosts with a j-th rank, ordered by
// that rank's number; the cross rank is this host's index among them.
TEST(RankLayout, CompleteLayoutMatchesEveryPlacementOfRanksOnHosts) {
  int placements = 0;
  for (int n = 1; n <= 7; ++n) {
    std::vector<int> host(static_cast<size_t>(n), 0);
    std::function<void(int, int)> place = [&](int r, int hosts) {
      if (r < n) {
        for (int h = 0; h <= hosts; ++h) {
          host[static_cast<size_t>(r)] = h;
          place(r + 1, std::max(hosts, h + 1));
        }
        return;
      }
      ++placements;
      std::vector<std::vector<int>> members(static_cast<size_t>(hosts));
      for (int q = 0; q < n; ++q)
        members[static_cast<size_t>(host[static_cast<size_t>(q)])].push_back(q);
      std::vector<LocalPlace> places(static_cast<size_t>(n));
      for (const auto& m : members) {
        for (size_t i = 0; i < m.size(); ++i)
          places[static_cast<size_t>(m[i])] = {static_cast<int32_t>(i),
                                               static_cast<int32_t>(m.size())};
      }
      bool even = true;
      for (const auto& m : members) even = even && m.size() == members[0].size();
      for (int q = 0; q < n; ++q) {
        const auto& mine = members[static_cast<size_t>(host[static_cast<size_t>(q)])];
        const auto j = static_cast<size_t>(std::find(mine.begin(), mine.end(), q) - mine.begin());
        std::vector<int> jth;  // the j-th rank of every host that has one
        for (const auto& m : members) {
          if (m.size() > j) jth.push_back(m[j]);
        }
        std::sort(jth.begin(), jth.end());
        RankLayout l;
        l.rank = q;
        l.size = n;
        l.local_rank = places[static_cast<size_t>(q)].local_rank;
        l.local_size = places[static_cast<size_t>(q)].local_size;
        l.cross_rank = 99;  // (whatever a launcher guessed)
        l.cross_size = 99;
        l.homogeneous = !even;
        CompleteLayout(places, &l);
        std::string where = "rank " + std::to_string(q) + " of hosts";
        for (int h : host) where += " " + std::to_string(h);
        ASSERT_EQ(l.cross_rank, std::find(jth.begin(), jth.end(), q) - jth.begin()) << where;
        ASSERT_EQ(l.cross_size, static_cast<int>(jth.size())) << where;
        ASSERT_EQ(l.homogeneous, even) << where;
        ASSERT_EQ(l.local_rank, static_cast<int>(j)) << where;  // (left as given)
      }
    };
    place(0, 0);
  }
  EXPECT_EQ(placements, 1 + 2 + 5 + 15 + 52 + 203 + 877);  // Bell numbers: every placement
}

// The launcher's guess and the completed layout, where they part: two
// hosts with ranks placed round-robin (mpirun --map-by node), and hosts of
// 2 and 1 ranks, under Open MPI's variables (which give no cross values).
TEST(RankLayout, CompleteLayoutMendsWhatOpenMpiVariablesCannotTell) {
  auto from_env = [](int rank, int size, int local_rank, int local_size) {
    auto l = RankLayoutFromEnv({{"OMPI_COMM_WORLD_RANK", std::to_string(rank)},
                                {"OMPI_COMM_WORLD_SIZE", std::to_string(size)},
                                {"OMPI_COMM_WORLD_LOCAL_RANK", std::to_string(local_rank)},
                                {"OMPI_COMM_WORLD_LOCAL_SIZE", std::to_string(local_size)}});
    EXPECT_TRUE(l.ok()) << l.status().ToString();
    return *l;
  };
  // Round-robin: ranks 0 and 2 on host A, 1 and 3 on host B.
  const std::vector<LocalPlace> rr = {{0, 2}, {0, 2}, {1, 2}, {1, 2}};
  RankLayout r1 = from_env(1, 4, 0, 2);
  EXPECT_EQ(r1.cross_rank, 0);  // the guess: rank / local size
  CompleteLayout(rr, &r1);
  EXPECT_EQ(r1.cross_rank, 1);
  EXPECT_EQ(r1.cross_size, 2);
  EXPECT_TRUE(r1.homogeneous);
  RankLayout r2 = from_env(2, 4, 1, 2);
  CompleteLayout(rr, &r2);
  EXPECT_EQ(r2.cross_rank, 0);
  // Hosts of 2 and 1: ranks 0 and 1 on A, 2 on B.
  const std::vector<LocalPlace> uneven = {{0, 2}, {1, 2}, {0, 1}};
  RankLayout b = from_env(2, 3, 0, 1);
  EXPECT_TRUE(b.homogeneous);  // the guess: 3 == 1 * 3
  EXPECT_EQ(b.cross_size, 3);
  CompleteLayout(uneven, &b);
  EXPECT_FALSE(b.homogeneous);
  EXPECT_EQ(b.cross_rank, 1);
  EXPECT_EQ(b.cross_size, 2);
  RankLayout a1 = from_env(1, 3, 1, 2);
  CompleteLayout(uneven, &a1);
  EXPECT_EQ(a1.cross_rank, 0);
  EXPECT_EQ(a1.cross_size, 1);
  EXPECT_FALSE(a1.homogeneous);
}

}  // namespace
}  // namespace hora
