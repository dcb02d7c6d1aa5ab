// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "api/process_connect.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "api/abortable_store.h"
#include "api/rendezvous.h"
#include "api/settings_agreement.h"
#include "common/cores.h"
#include "launch/elastic_place.h"
#include "launch/failure_report.h"
#include "net/congestion.h"
#include "net/socket.h"
#include "store/tcp_store_client.h"
#include "store/tcp_store_server.h"
#include "transport/combinators/hybrid/hybrid_transport.h"
#include "transport/shm/shm_transport.h"
#include "transport/tcp/tcp_transport.h"

namespace hora {

ProcessWiring::ProcessWiring() = default;
ProcessWiring::~ProcessWiring() = default;
ProcessWiring::ProcessWiring(ProcessWiring&&) noexcept = default;

namespace {

std::string HostKeyPrefix(const std::string& job_id) { return "hora/" + job_id + "/host/"; }

// Every rank of a job spanning hosts publishes its host name, so that the
// ranks sharing a host can find each other (RanksOnThisHost).
Status PublishHost(Store& store, const std::string& job_id, const RankLayout& l,
                   const std::map<std::string, std::string>& env, std::string* host) {
  if (auto it = env.find("HORA_HOSTNAME"); it != env.end()) *host = it->second;
  if (host->empty()) {
    char name[256] = {};
    gethostname(name, sizeof name - 1);
    *host = name;
  }
  return store.Set(HostKeyPrefix(job_id) + std::to_string(l.rank),
                   Bytes(host->begin(), host->end()));
}

// The job-wide ranks that share this rank's host, in order.
Result<std::vector<int>> RanksOnThisHost(Store& store, const std::string& job_id,
                                         const RankLayout& l, const std::string& host,
                                         Duration timeout) {
  const std::string prefix = HostKeyPrefix(job_id);
  std::vector<int> local;
  for (int r = 0; r < l.size; ++r) {
    HORA_ASSIGN_OR_RETURN(Bytes other, store.Get(prefix + std::to_string(r), timeout));
    if (std::string(other.begin(), other.end()) == host) local.push_back(r);
  }
  return local;
}

Bytes NumberBytes(int64_t n) {
  const std::string s = std::to_string(n);
  return Bytes(s.begin(), s.end());
}

// Which Session of the job this is in this process (1, then 2 after a
// shutdown() and init(), ...). Every rank counts its own, in the store;
// rank 0's count is the job's: it announces it, and every other rank waits
// for the announcement of its own count and checks that rank 0's is the
// same (a Session that failed to start on some ranks only leaves the
// counts apart: that fails here, saying so, instead of at the timeout).
Result<int64_t> AgreeOnSession(Store& store, const std::string& job, int rank, Duration timeout) {
  const std::string prefix = "hora/" + job + "/session";
  HORA_ASSIGN_OR_RETURN(int64_t n, store.Add(prefix + "s/" + std::to_string(rank), 1));
  const std::string begun = prefix + "/" + std::to_string(n) + "/begun";
  if (rank == 0) {
    HORA_RETURN_IF_ERROR(store.Set(prefix, NumberBytes(n)));
    HORA_RETURN_IF_ERROR(store.Set(begun, Bytes{1}));
    return n;
  }
  const std::string where =
      "rank " + std::to_string(rank) + ": Session " + std::to_string(n) + " of this process";
  const std::string apart =
      " (a Session that failed to start on some ranks only leaves their counts apart: restart "
      "every rank)";
  Status st = store.Get(begun, timeout).status();
  if (!st.ok()) return st.WithContext(where + ": rank 0 did not begin it" + apart);
  HORA_ASSIGN_OR_RETURN(Bytes value, store.Get(prefix, timeout));
  if (value != NumberBytes(n)) {
    return UnavailableError(where + ", but rank 0 is at its Session " +
                            std::string(value.begin(), value.end()) + apart);
  }
  return n;
}

// An elastic worker's place in the next generation (docs/dev/elastic.md):
// its arrival is counted, and horarun answers it once it has formed a
// generation with this worker (or ends the job), within `timeout`.
Result<ElasticPlace> AwaitElasticPlace(Store& store, const std::string& job,
                                       const std::string& worker, Duration timeout) {
  HORA_ASSIGN_OR_RETURN(const int64_t arrival, store.Add(ElasticArrivalKey(job, worker), 1));
  const std::string where =
      "elastic worker " + worker + " (its init() number " + std::to_string(arrival) + ")";
  if (Result<int64_t> counted = store.Add(ElasticArrivalsKey(job), 1); !counted.ok()) {
    return counted.status().WithContext(where + ": counting its arrival");  // (after: its doc)
  }
  Result<Bytes> value = store.Get(ElasticAssignmentKey(job, worker, arrival), timeout);
  if (!value.ok()) {
    return value.status().WithContext(where + ": horarun placed it in no new world");
  }
  Result<ElasticPlace> place = ParseElasticAssignment(std::string(value->begin(), value->end()));
  if (!place.ok()) return place.status().WithContext(where + ": the job ended");
  return place;
}

// Every transport connects only once every rank has reached the store, so
// no rank needs the secret file any more.
ProcessWiring Connected(ProcessWiring w) {
  if (w.secret_file) w.secret_file->Remove();
  return w;
}

// The shared-memory options of a host's `local_ranks` ranks.
ShmOptions HostShmOptions(const Config& config, Duration timeout, Duration spin,
                          Duration peer_timeout, std::vector<int> job_ranks, size_t local_ranks) {
  // A rank bound to a core (HORA_BIND_TO=core binds only where the host's
  // ranks fit its CPUs) sees a mask of one: count the machine's instead.
  int cores = AvailableCores();
  if (config.bind_to == "core" && cores == 1) {
    cores = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  }
  ShmOptions o{timeout, spin, peer_timeout, std::move(job_ranks),
               ShmSingleCopyBytes(config.shm_single_copy_bytes, local_ranks, cores)};
  o.single_copy_on_request = config.shm_single_copy_bytes != 0;
  return o;
}

}  // namespace

Result<ProcessWiring> ConnectProcess(const Config& config,
                                     const std::map<std::string, std::string>& env,
                                     const Logger& logger) {
  ProcessWiring w;
  HORA_ASSIGN_OR_RETURN(w.layout, RankLayoutFromEnv(env));
  const RankLayout& l = w.layout;
  const Duration timeout = SecondsToDuration(config.start_timeout_s);
  const Duration spin = SecondsToDuration(config.wait_spin_us * 1e-6);
  const Duration peer_timeout = SecondsToDuration(config.peer_timeout_s);

  // What killed jobs left in /dev/shm on this host (their creators gone),
  // whichever transport this job takes.
  (void)RemoveDeadShmSegments();
  HORA_ASSIGN_OR_RETURN(Rendezvous rv, JoinRendezvous(config, env, l, logger));
  w.server = std::move(rv.server);
  // (The keys this rank sets are this Session's, read while it connects:
  // deleted once every rank has; counters, which number the Sessions, stay.)
  w.rendezvous_keys = std::make_shared<KeyRecordingStore>(std::move(rv.store));
  w.store = w.rendezvous_keys;
  w.secret_file = std::move(rv.secret_file);
  w.mpi = rv.mpi;
  const std::string& store_addr = rv.store_addr;
  const std::string& secret = rv.secret;

  // Shared-memory segment names need a job id unique on this host:
  // horarun's, or one derived from the rendezvous address.
  std::string job = config.job_id;
  if (job.empty()) {
    job = "at-" + store_addr;
    for (char& c : job) {
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-') c = '_';
    }
  }
  // The keys and segment names of one Session never meet those of the one
  // before it, some of whose ranks may still be closing. An elastic
  // worker's world is its generation's, whatever it was before.
  std::string id;
  if (!config.worker_id.empty()) {
    // (horarun answers within two of its timeouts: one for a worker that
    // never comes, one for too few workers; a margin for its polling.)
    const Duration elastic = SecondsToDuration(config.elastic_timeout_s);
    // (Read before arriving, for a horarun that does not say them with the
    // place: it starts and stops workers before it counts an update, so the
    // world formed after this arrival has them.)
    HORA_ASSIGN_OR_RETURN(w.hosts_added_known, w.store->Add(ElasticHostsAddedKey(job), 0));
    HORA_ASSIGN_OR_RETURN(w.hosts_removed_known, w.store->Add(ElasticHostsRemovedKey(job), 0));
    HORA_ASSIGN_OR_RETURN(
        ElasticPlace place,
        AwaitElasticPlace(*w.store, job, config.worker_id, 2 * elastic + std::chrono::seconds(10)));
    w.layout = place.layout;
    w.elastic_generation = place.generation;
    if (place.hosts_added >= 0) {
      // (What horarun had counted as it formed this world: an update
      // counted after the reads above, of a worker already in or out of it,
      // needs no second reset.)
      w.hosts_added_known = place.hosts_added;
      w.hosts_removed_known = place.hosts_removed;
    }
    id = job + "-g" + std::to_string(place.generation);
    // A member that ends while this world connects ends every wait for it.
    w.store = std::make_shared<AbortableStore>(std::move(w.store),
                                               ElasticBrokenKey(job, place.generation));
  } else {
    if (!config.job_id.empty()) {
      // horarun's job: a rank that ends before every rank connected ends
      // every wait for it, naming it (launch/failure_report.h).
      w.store = std::make_shared<AbortableStore>(std::move(w.store), RankEndedKey(job));
    }
    HORA_ASSIGN_OR_RETURN(int64_t session, AgreeOnSession(*w.store, job, l.rank, timeout));
    id = job + "-s" + std::to_string(session);
  }
  // Automatic choice: shared memory when the whole job is on this host,
  // otherwise shared memory within each host and TCP across (a rank alone on
  // its host uses TCP only, but still publishes its host for the others).
  std::string transport = config.transport;
  if (transport.empty()) transport = l.local_size == l.size ? "shm" : "shm+tcp";
  NamedValues agreed = AgreedSettings(config);
  for (auto& [name, value] : agreed) {
    if (name == "HORA_TRANSPORT") value = transport;  // (as chosen: "" is a choice)
  }
  // Whether this host's kernel takes HORA_TCP_CONGESTION, whatever the
  // transport (a typo fails on one host as on several), compared with the
  // settings: where some hosts refuse it every rank fails at once, naming
  // them, instead of waiting for connections that never come.
  // (An elastic worker whose host refuses it fails alone, as any worker
  // that cannot start: the others form a world without it.)
  const Status congestion = config.tcp_congestion.empty()
                                ? Status::Ok()
                                : net::CheckCongestionControl(config.tcp_congestion);
  if (config.worker_id.empty()) {
    agreed.emplace_back("HORA_TCP_CONGESTION on this host",
                        congestion.ok() ? "usable" : congestion.message());
  }
  HORA_RETURN_IF_ERROR(CompareSettings(*w.store, "hora/" + id, l.rank, l.size, agreed, timeout));
  if (!congestion.ok()) {
    char name[256] = {};
    gethostname(name, sizeof name - 1);
    return congestion.WithContext("rank " + std::to_string(l.rank) + " on " + name);
  }
  if (transport == "shm") {
    if (l.local_size != l.size) {
      return InvalidArgument("HORA_TRANSPORT=shm needs every rank on one host, but rank " +
                             std::to_string(l.rank) + " sees " + std::to_string(l.local_size) +
                             " of " + std::to_string(l.size) + " ranks on its host");
    }
    HORA_ASSIGN_OR_RETURN(w.transport,
                          CreateShmTransport(l.rank, l.size, *w.store, id,
                                             HostShmOptions(config, timeout, spin, peer_timeout, {},
                                                            static_cast<size_t>(l.size))));
    return Connected(std::move(w));
  }
  TcpMeshOptions mesh;
  mesh.rank = l.rank;
  mesh.size = l.size;
  mesh.key_prefix = "hora/" + id + "/tcp";
  mesh.secret = secret;
  mesh.iface = config.iface;
  mesh.timeout = timeout;
  mesh.wait_spin = spin;
  mesh.yield = l.local_size > AvailableCores();
  mesh.peer_timeout = peer_timeout;
  mesh.logger = &logger;
  mesh.congestion = config.tcp_congestion;
  if (l.local_size == l.size && config.iface.empty()) mesh.iface = "127.0.0.1";
  HORA_ASSIGN_OR_RETURN(std::unique_ptr<Transport> tcp, CreateTcpTransport(*w.store, mesh));
  if (transport == "tcp") {
    w.transport = std::move(tcp);
    return Connected(std::move(w));
  }
  // Shared memory among the ranks on this host, TCP to the others.
  std::string host;
  HORA_RETURN_IF_ERROR(PublishHost(*w.store, id, l, env, &host));
  if (l.local_size == 1) {
    w.transport = std::move(tcp);
    return Connected(std::move(w));
  }
  HORA_ASSIGN_OR_RETURN(std::vector<int> local, RanksOnThisHost(*w.store, id, l, host, timeout));
  const int local_rank =
      static_cast<int>(std::find(local.begin(), local.end(), l.rank) - local.begin());
  HORA_ASSIGN_OR_RETURN(
      std::unique_ptr<Transport> shm,
      CreateShmTransport(local_rank, static_cast<int>(local.size()), *w.store,
                         id + "-g" + std::to_string(local.front()),
                         HostShmOptions(config, timeout, spin, peer_timeout, local, local.size())));
  w.transport =
      CreateHybridTransport(l.rank, l.size, std::move(local), std::move(shm), std::move(tcp));
  return Connected(std::move(w));
}

}  // namespace hora
