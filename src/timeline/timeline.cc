// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "timeline/timeline.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "common/thread_name.h"

namespace hora {

std::string JsonQuote(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
}

Result<std::unique_ptr<Timeline>> Timeline::Open(const std::string& path, int rank,
                                                 uint64_t max_bytes, const Logger& logger) {
  struct stat st {};
  if (stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    return InvalidArgument("HORA_TIMELINE='" + path + "' is a directory; give a file path");
  }
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    return InvalidArgument("HORA_TIMELINE='" + path +
                           "': cannot write it: " + std::strerror(errno));
  }
  static const char kStart[] = "[\n]";
  if (pwrite(fd, kStart, 3, 0) != 3) {
    const int err = errno;
    close(fd);
    return InvalidArgument("HORA_TIMELINE='" + path + "': " + std::strerror(err));
  }
  return std::unique_ptr<Timeline>(new Timeline(fd, path, rank, max_bytes, logger));
}

Timeline::Timeline(int fd, std::string path, int rank, uint64_t max_bytes, const Logger& logger)
    : fd_(fd),
      path_(std::move(path)),
      rank_(rank),
      max_bytes_(max_bytes),
      logger_(logger),
      epoch_(Clock::now()),
      offset_(2) {
  writer_ = std::thread([this] {
    NameThisThread("hora-timeline");
    WriterLoop();
  });
}

Timeline::~Timeline() {
  {
    MutexLock lock(mu_);
    closing_ = true;
  }
  cv_.notify_all();
  writer_.join();
  close(fd_);
}

int Timeline::RowOf(const std::string& tensor) {
  auto [it, fresh] = rows_.try_emplace(tensor, static_cast<int>(rows_.size()) + 1);
  if (fresh) {
    queue_.push_back("{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":" + std::to_string(rank_) +
                     ",\"tid\":" + std::to_string(it->second) +
                     ",\"args\":{\"name\":" + JsonQuote(tensor) + "}}");
    queued_bytes_ += queue_.back().size() + 2;
  }
  return it->second;
}

void Timeline::Span(const std::string& tensor, const char* phase, TimePoint start, TimePoint end,
                    const std::string& args_json) {
  const auto us = [&](TimePoint t) {
    return std::chrono::duration_cast<std::chrono::microseconds>(t - epoch_).count();
  };
  MutexLock lock(mu_);
  if (truncated_ || closing_) return;
  const int row = RowOf(tensor);
  std::string e = "{\"name\":\"" + std::string(phase) +
                  "\",\"ph\":\"X\",\"pid\":" + std::to_string(rank_) +
                  ",\"tid\":" + std::to_string(row) + ",\"ts\":" + std::to_string(us(start)) +
                  ",\"dur\":" + std::to_string(std::max<int64_t>(0, us(end) - us(start)));
  if (!args_json.empty()) e += ",\"args\":" + args_json;
  e += "}";
  queued_bytes_ += e.size() + 2;
  if (max_bytes_ > 0 && queued_bytes_ > max_bytes_) {
    truncated_ = true;
    e = "{\"name\":\"timeline truncated "
        "(HORA_TIMELINE_MAX_MB)\",\"ph\":\"i\",\"s\":\"g\",\"pid\":" +
        std::to_string(rank_) + ",\"tid\":0,\"ts\":" + std::to_string(us(end)) + "}";
  }
  queue_.push_back(std::move(e));
  cv_.notify_one();
}

void Timeline::WriterLoop() {
  for (;;) {
    std::vector<std::string> batch;
    bool closing;
    {
      MutexLock lock(mu_);
      // (The predicate runs with mu_ held, where the analysis cannot see it.)
      cv_.wait_for(lock.native(), std::chrono::milliseconds(100),
                   [&]() HORA_NO_THREAD_SAFETY_ANALYSIS { return closing_ || !queue_.empty(); });
      batch.swap(queue_);
      closing = closing_;
    }
    if (!batch.empty() && !failed_) {
      // Written over the closing bracket, and closed again: the file is
      // valid JSON after every write.
      std::string text;
      for (const std::string& e : batch) {
        text += first_ ? "" : ",\n";
        text += e;
        first_ = false;
      }
      const uint64_t body = text.size();
      text += "\n]";
      // (A short write is followed by one that says why it stopped.)
      size_t done = 0;
      int err = 0;
      while (done < text.size() && err == 0) {
        const ssize_t n =
            pwrite(fd_, text.data() + done, text.size() - done, static_cast<off_t>(offset_ + done));
        if (n > 0) {
          done += static_cast<size_t>(n);
        } else if (n == 0 || errno != EINTR) {
          err = n == 0 ? ENOSPC : errno;
        }
      }
      if (err == 0) {
        offset_ += body;
      } else {
        WriteFailed(err);
      }
    }
    if (closing) return;
  }
}

void Timeline::WriteFailed(int err) {
  failed_ = true;
  // The bracket back where it was (bytes the file had, so no new space is
  // needed), and the part of this write after it gone.
  static const char kEnd[] = "\n]";
  const bool restored = pwrite(fd_, kEnd, 2, static_cast<off_t>(offset_)) == 2 &&
                        ftruncate(fd_, static_cast<off_t>(offset_ + 2)) == 0;
  {
    MutexLock lock(mu_);
    truncated_ = true;  // (Span queues nothing more)
    queue_.clear();
  }
  logger_.Warning("timeline " + path_ + ": a write failed (" + std::strerror(err) +
                  "); the timeline stops here" +
                  (restored ? ", and the file keeps what was written before it (valid JSON)"
                            : ", and the file may end mid-event"));
}

}  // namespace hora
