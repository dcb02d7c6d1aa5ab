// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// A Store for tests whose ranks are forked processes (no server to start).
#pragma once

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "store/store.h"

namespace hora::testing {

// A Store over a directory: one file per key, written atomically (write a
// temporary file, then rename); Get polls until the key exists. Test only.
class FileStore final : public Store {
 public:
  explicit FileStore(std::string dir) : dir_(std::move(dir)) {}

  Status Set(const std::string& key, const Bytes& value) override {
    const std::string path = Path(key), tmp = path + ".tmp." + std::to_string(getpid());
    {
      std::ofstream f(tmp, std::ios::binary);
      f.write(reinterpret_cast<const char*>(value.data()),
              static_cast<std::streamsize>(value.size()));
      if (!f) return UnavailableError("cannot write " + tmp);
    }
    if (std::rename(tmp.c_str(), path.c_str()) != 0)
      return UnavailableError("cannot rename " + tmp);
    return Status::Ok();
  }

  Result<Bytes> Get(const std::string& key, Duration timeout) override {
    const TimePoint deadline = Clock::now() + timeout;
    for (;;) {
      std::ifstream f(Path(key), std::ios::binary);
      if (f) return Bytes(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
      if (Clock::now() >= deadline) return TimeoutError("timed out waiting for key '" + key + "'");
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }

  Result<int64_t> Add(const std::string&, int64_t) override {
    return UnimplementedError("test FileStore has no counters");
  }

  Status Wait(const std::vector<std::string>& keys, Duration timeout) override {
    const TimePoint deadline = Clock::now() + timeout;
    for (const auto& k : keys) HORA_RETURN_IF_ERROR(Get(k, deadline - Clock::now()).status());
    return Status::Ok();
  }

  Result<bool> Delete(const std::string& key) override {
    return std::remove(Path(key).c_str()) == 0;
  }

 private:
  std::string Path(std::string key) const {
    std::replace(key.begin(), key.end(), '/', '%');
    return dir_ + "/" + key;
  }
  std::string dir_;
};

}  // namespace hora::testing
