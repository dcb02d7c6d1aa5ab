// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "host_discovery.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <set>
#include <sstream>
#include <thread>
#include <utility>

namespace hora::horarun {

Result<std::vector<HostSlots>> ParseDiscoveredHosts(const std::string& output, int slots_per_host) {
  std::vector<HostSlots> hosts;
  std::set<std::string> seen;
  std::istringstream in(output);
  std::string line;
  int number = 0;
  while (std::getline(in, line)) {
    ++number;
    const size_t b = line.find_first_not_of(" \t\r");
    if (b == std::string::npos || line[b] == '#') continue;
    line = line.substr(b, line.find_last_not_of(" \t\r") - b + 1);
    const std::string where = "line " + std::to_string(number) + " '" + line + "'";
    HostSlots h;
    // "host", "host:N", "[v6]", "[v6]:N", or a bare IPv6 address.
    std::string slots_text;
    if (line[0] == '[') {
      const size_t close = line.find(']');
      if (close == std::string::npos) return InvalidArgument(where + " is not a host name");
      h.host = line.substr(1, close - 1);
      if (close + 1 < line.size()) {
        if (line[close + 1] != ':') return InvalidArgument(where + " is not a host name");
        slots_text = line.substr(close + 2);
        if (slots_text.empty()) slots_text = "-";
      }
    } else if (std::count(line.begin(), line.end(), ':') == 1) {
      h.host = line.substr(0, line.find(':'));
      slots_text = line.substr(line.find(':') + 1);
      if (slots_text.empty()) slots_text = "-";
    } else {
      h.host = line;
    }
    if (!slots_text.empty()) {
      char* end = nullptr;
      const long slots = std::strtol(slots_text.c_str(), &end, 10);
      if (*end != '\0' || slots < 1 || slots > 100000) {
        return InvalidArgument(where + ": the slots are not a count (1 to 100000)");
      }
      h.slots = static_cast<int>(slots);
    } else {
      if (slots_per_host < 1) {
        return InvalidArgument(where +
                               " gives no slots: write host:slots, or give --slots-per-host");
      }
      h.slots = slots_per_host;
    }
    if (h.host.empty() || h.host.find_first_of(" \t") != std::string::npos) {
      return InvalidArgument(where + " is not a host name");
    }
    if (!seen.insert(h.host).second) return InvalidArgument(where + ": " + h.host + " again");
    hosts.push_back(h);
  }
  return hosts;
}

Result<std::string> RunDiscoveryScript(const std::string& script, std::chrono::milliseconds timeout,
                                       const std::atomic<bool>* cancel) {
  if (access(script.c_str(), X_OK) != 0) {
    return UnavailableError("the host discovery script '" + script +
                            "' cannot start: " + std::strerror(errno));
  }
  int out[2], err[2];
  if (pipe2(out, O_CLOEXEC) != 0) {
    return UnavailableError("the host discovery script '" + script +
                            "': pipe: " + std::strerror(errno));
  }
  if (pipe2(err, O_CLOEXEC) != 0) {
    close(out[0]);
    close(out[1]);
    return UnavailableError("the host discovery script '" + script +
                            "': pipe: " + std::strerror(errno));
  }
  // (Not horarun's stdin, which it forwards to the ranks: a script reading
  // it would wait out its timeout every time.)
  const int null_in = open("/dev/null", O_RDONLY | O_CLOEXEC);
  // (Its own process group, so that a timeout ends what it started too;
  // the child calls only async-signal-safe functions before exec.)
  char* argv[] = {const_cast<char*>(script.c_str()), nullptr};
  const pid_t pid = fork();
  if (pid == 0) {
    setpgid(0, 0);
    dup2(out[1], STDOUT_FILENO);
    dup2(err[1], STDERR_FILENO);
    if (null_in >= 0) dup2(null_in, STDIN_FILENO);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    execv(script.c_str(), argv);
    _exit(127);
  }
  const int rc = pid < 0 ? errno : 0;
  close(out[1]);
  close(err[1]);
  if (null_in >= 0) close(null_in);
  if (rc != 0) {
    close(out[0]);
    close(err[0]);
    return UnavailableError("the host discovery script '" + script +
                            "' cannot start: " + std::strerror(rc));
  }
  setpgid(pid, pid);  // (also here: whichever runs first)
  std::string text;
  std::string said;  // its standard error: told with a failure, once
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  auto left_ms = [&] {
    return std::chrono::duration_cast<std::chrono::milliseconds>(deadline -
                                                                 std::chrono::steady_clock::now())
        .count();
  };
  std::string why_killed;  // (empty: it ended by itself)
  // Its output, until end of file: one deadline covers reading and its exit.
  auto cancelled = [&] { return cancel != nullptr && cancel->load(); };
  for (;;) {
    if (left_ms() <= 0) {
      why_killed = "gave no whole answer within";
      break;
    }
    if (cancelled()) {
      why_killed = "was stopped with horarun";
      break;
    }
    pollfd p[2] = {{out[0], POLLIN, 0}, {err[0], POLLIN, 0}};
    const int n = poll(p, err[0] >= 0 ? 2 : 1, static_cast<int>(std::min<int64_t>(left_ms(), 100)));
    if (n <= 0) continue;  // (EINTR, or the deadline: looked at above)
    char buf[4096];
    if (err[0] >= 0 && p[1].revents != 0) {
      const ssize_t got = read(err[0], buf, sizeof buf);
      if (got > 0) {
        said.append(buf, static_cast<size_t>(got));
        if (said.size() > 4096) said.erase(0, said.size() - 4096);  // (its last words)
      } else if (got == 0 || errno != EINTR) {
        close(std::exchange(err[0], -1));
      }
    }
    if (p[0].revents == 0) continue;
    const ssize_t got = read(out[0], buf, sizeof buf);
    if (got > 0) {
      text.append(buf, static_cast<size_t>(got));
      if (text.size() > (size_t{1} << 20)) {
        why_killed = "wrote more than 1 MiB of hosts";
        break;
      }
    } else if (got == 0 || errno != EINTR) {
      break;
    }
  }
  close(out[0]);
  if (err[0] >= 0) {  // (what it wrote to stderr before its stdout ended: 64 KiB at most)
    pollfd p{err[0], POLLIN, 0};
    char buf[4096];
    size_t drained = 0;
    for (ssize_t got; drained < (size_t{64} << 10) && poll(&p, 1, 0) > 0 &&
                      (got = read(err[0], buf, sizeof buf)) > 0;) {
      drained += static_cast<size_t>(got);
      said.append(buf, static_cast<size_t>(got));
      if (said.size() > 4096) said.erase(0, said.size() - 4096);
    }
    close(err[0]);
  }
  // Its last lines, on one line, for a message.
  while (!said.empty() && (said.back() == '\n' || said.back() == ' ')) said.pop_back();
  if (said.size() > 300) said = "..." + said.substr(said.size() - 300);
  for (char& c : said) {
    if (c == '\n') c = ' ';
  }
  const std::string its_words = said.empty() ? "" : " (its stderr: " + said + ")";
  int status = 0;
  for (;;) {  // (its exit, bounded by the same deadline)
    const pid_t done = waitpid(pid, &status, WNOHANG);
    if (done == pid || (done < 0 && errno != EINTR)) break;
    if (!why_killed.empty() || left_ms() <= 0 || cancelled()) {
      if (why_killed.empty()) why_killed = "did not end within";
      kill(-pid, SIGKILL);
      while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  const std::string name = "the host discovery script '" + script + "' ";
  if (cancelled()) return AbortedError(name + "was stopped with horarun");
  if (!why_killed.empty()) {
    const std::string within =
        why_killed.back() == 'n'
            ? " " + std::to_string(std::chrono::duration<double>(timeout).count()).substr(0, 4) +
                  " s"
            : "";
    return TimeoutError(name + why_killed + within + " (stopped)" + its_words);
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return UnavailableError(name +
                            (WIFEXITED(status)
                                 ? "exited with code " + std::to_string(WEXITSTATUS(status))
                                 : "was killed by signal " + std::to_string(WTERMSIG(status))) +
                            its_words);
  }
  return text;
}

BackgroundDiscovery::BackgroundDiscovery(std::string script, std::chrono::milliseconds timeout)
    : script_(std::move(script)), timeout_(timeout) {}

BackgroundDiscovery::~BackgroundDiscovery() {
  cancel_ = true;
  if (thread_.joinable()) thread_.join();
}

bool BackgroundDiscovery::Start() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (running_ || result_.has_value()) return false;
    running_ = true;
  }
  if (thread_.joinable()) thread_.join();  // (the last run's, ended)
  thread_ = std::thread([this] {
    Result<std::string> r = RunDiscoveryScript(script_, timeout_, &cancel_);
    std::lock_guard<std::mutex> lock(mu_);
    result_ = std::move(r);
    running_ = false;
  });
  return true;
}

std::optional<Result<std::string>> BackgroundDiscovery::Take() {
  std::lock_guard<std::mutex> lock(mu_);
  std::optional<Result<std::string>> r = std::move(result_);
  result_.reset();
  return r;
}

}  // namespace hora::horarun
