// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "api/autotune_start.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "collectives/shared_common.h"

namespace hora {

std::unique_ptr<Autotuner> StartAutotuner(const Config& config, Comm& data, bool hora_backend,
                                          const Logger& logger) {
  if (config.autotune == 0 || data.rank() != 0) return nullptr;
  std::vector<int> local;
  const Transport* host = data.transport().ThisHost(&local);
  const bool several_hosts = host != nullptr && static_cast<int>(local.size()) < data.size();
  const Tunables start = Tunables::FromConfig(config);
  TuningSpace space = TuningSpace::Around(start, hora_backend && !SharedUsable(data),
                                          hora_backend && several_hosts);
  std::function<void(const std::string&)> log_line;
  if (!config.autotune_log.empty()) {
    std::FILE* f = std::fopen(config.autotune_log.c_str(), "w");
    if (f == nullptr) {
      logger.Error("HORA_AUTOTUNE_LOG: cannot write '" + config.autotune_log +
                   "': " + std::strerror(errno) + "; autotuning goes on without its log");
    } else {
      std::shared_ptr<std::FILE> file(f, [](std::FILE* p) { std::fclose(p); });
      log_line = [file](const std::string& line) {
        std::fputs((line + "\n").c_str(), file.get());
        std::fflush(file.get());
      };
    }
  }
  AutotuneOptions options;
  options.warmup_samples =
      static_cast<int>(std::min<uint64_t>(config.autotune_warmup_samples, 1 << 20));
  options.steps_per_sample =
      static_cast<int>(std::clamp<uint64_t>(config.autotune_steps_per_sample, 1, 1 << 20));
  options.no_step_warn_after = SecondsToDuration(config.autotune_no_step_warn_s);
  return std::make_unique<Autotuner>(options, start, std::move(space), std::move(log_line));
}

}  // namespace hora
