// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// A mutex whose locking rules the compiler checks: members say which mutex
// guards them (HORA_GUARDED_BY), functions which mutex they need held
// (HORA_REQUIRES) or must not hold (HORA_EXCLUDES), and clang's
// -Wthread-safety verifies every access (`make check-thread-safety`, part
// of `make test`). With other compilers the annotations are empty.
//
//   Mutex mu_;
//   int count_ HORA_GUARDED_BY(mu_);
//   void Add() HORA_EXCLUDES(mu_) { MutexLock lock(mu_); ++count_; }
//
// A condition variable waits on MutexLock::native() (a std::unique_lock of
// the same mutex); the analysis counts the mutex held throughout the wait.
#pragma once

#include <mutex>

#if defined(__clang__)
#define HORA_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define HORA_THREAD_ANNOTATION(x)
#endif

#define HORA_CAPABILITY(x) HORA_THREAD_ANNOTATION(capability(x))
#define HORA_SCOPED_CAPABILITY HORA_THREAD_ANNOTATION(scoped_lockable)
#define HORA_GUARDED_BY(x) HORA_THREAD_ANNOTATION(guarded_by(x))
#define HORA_PT_GUARDED_BY(x) HORA_THREAD_ANNOTATION(pt_guarded_by(x))
#define HORA_REQUIRES(...) HORA_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
#define HORA_EXCLUDES(...) HORA_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
#define HORA_ACQUIRE(...) HORA_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#define HORA_RELEASE(...) HORA_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
#define HORA_TRY_ACQUIRE(...) HORA_THREAD_ANNOTATION(try_acquire_capability(__VA_ARGS__))
#define HORA_RETURN_CAPABILITY(x) HORA_THREAD_ANNOTATION(lock_returned(x))
// For the few reads the analysis cannot follow (each says why).
#define HORA_NO_THREAD_SAFETY_ANALYSIS HORA_THREAD_ANNOTATION(no_thread_safety_analysis)

namespace hora {

class HORA_CAPABILITY("mutex") Mutex {
 public:
  void lock() HORA_ACQUIRE() { m_.lock(); }
  void unlock() HORA_RELEASE() { m_.unlock(); }
  bool try_lock() HORA_TRY_ACQUIRE(true) { return m_.try_lock(); }
  std::mutex& native() { return m_; }

 private:
  std::mutex m_;
};

// Holds a Mutex for its scope.
class HORA_SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex& m) HORA_ACQUIRE(m) : lock_(m.native()) {}
  // Takes over `m`, held already (after a successful try_lock):
  //   if (!mu_.try_lock()) return false;
  //   MutexLock lock(mu_, std::adopt_lock);
  MutexLock(Mutex& m, std::adopt_lock_t) HORA_REQUIRES(m) : lock_(m.native(), std::adopt_lock) {}
  ~MutexLock() HORA_RELEASE() {}
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;
  // For std::condition_variable's waits.
  std::unique_lock<std::mutex>& native() { return lock_; }

 private:
  std::unique_lock<std::mutex> lock_;
};

}  // namespace hora
