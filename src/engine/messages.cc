// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "engine/messages.h"

#include <algorithm>
#include <cstring>

namespace hora {
namespace {

constexpr uint8_t kVersion = 6;  // 6: a request's refusal (5: no GPU routing in requests)
constexpr uint32_t kMaxName = kMaxNameBytes;
constexpr uint32_t kMaxDims = 64;
constexpr uint32_t kMaxError = 1 << 20;

// Writes into `out` (cleared first; its capacity is kept).
class Writer {
 public:
  explicit Writer(std::vector<uint8_t>* out) : out_(*out) { out_.clear(); }
  template <typename T>
  void Put(T v) {
    const size_t at = out_.size();
    out_.resize(at + sizeof v);
    std::memcpy(out_.data() + at, &v, sizeof v);
  }
  void PutString(const std::string& s) {
    Put<uint32_t>(static_cast<uint32_t>(s.size()));
    out_.insert(out_.end(), s.begin(), s.end());
  }

 private:
  std::vector<uint8_t>& out_;
};

class Reader {
 public:
  Reader(const uint8_t* data, size_t size) : p_(data), left_(size) {}
  template <typename T>
  bool Get(T* v) {
    if (left_ < sizeof(T)) return false;
    std::memcpy(v, p_, sizeof(T));
    p_ += sizeof(T);
    left_ -= sizeof(T);
    return true;
  }
  bool GetString(std::string* s, uint32_t max) {
    uint32_t n = 0;
    if (!Get(&n) || n > max || n > left_) return false;
    s->assign(reinterpret_cast<const char*>(p_), n);
    p_ += n;
    left_ -= n;
    return true;
  }
  size_t left() const { return left_; }

 private:
  const uint8_t* p_;
  size_t left_;
};

constexpr uint32_t kMaxInts = 1 << 24;

void PutInts(Writer& w, const std::vector<int64_t>& v) {
  w.Put<uint32_t>(static_cast<uint32_t>(v.size()));
  for (int64_t x : v) w.Put<int64_t>(x);
}

bool GetInts(Reader& r, std::vector<int64_t>* v) {
  uint32_t n = 0;
  if (!r.Get(&n) || n > kMaxInts || n * sizeof(int64_t) > r.left()) return false;
  v->resize(n);
  for (auto& x : *v) {
    if (!r.Get(&x) || x < 0) return false;
  }
  return true;
}

void PutMeta(Writer& w, const RequestMeta& m) {
  w.PutString(m.name);
  w.Put<uint8_t>(static_cast<uint8_t>(m.op));
  w.Put<uint8_t>(static_cast<uint8_t>(m.dtype));
  w.Put<uint8_t>(static_cast<uint8_t>(m.reduction.op));
  w.Put<uint8_t>(static_cast<uint8_t>(m.device));
  w.Put<uint8_t>(m.cacheable ? 1 : 0);
  w.Put<double>(m.reduction.prescale_factor);
  w.Put<double>(m.reduction.postscale_factor);
  w.Put<int32_t>(m.root);
  w.Put<uint32_t>(static_cast<uint32_t>(m.shape.size()));
  for (int64_t d : m.shape) w.Put<int64_t>(d);
  w.PutString(m.group);
  w.Put<uint32_t>(m.group_size);
  PutInts(w, m.splits);
  w.PutString(m.refused);
}

bool GetMeta(Reader& r, RequestMeta* m) {
  uint8_t op = 0, dtype = 0, rop = 0, device = 0, cacheable = 0;
  uint32_t ndim = 0;
  if (!r.GetString(&m->name, kMaxName) || !r.Get(&op) || !r.Get(&dtype) || !r.Get(&rop) ||
      !r.Get(&device) || !r.Get(&cacheable) || cacheable > 1 ||
      !r.Get(&m->reduction.prescale_factor) || !r.Get(&m->reduction.postscale_factor) ||
      !r.Get(&m->root) || !r.Get(&ndim)) {
    return false;
  }
  if (op >= kOpTypeCount || dtype > static_cast<uint8_t>(DataType::kBool) ||
      rop > static_cast<uint8_t>(ReduceOp::kAdasum) ||
      device > static_cast<uint8_t>(DeviceType::kCUDA) || ndim > kMaxDims ||
      ndim * sizeof(int64_t) > r.left()) {
    return false;
  }
  m->op = static_cast<OpType>(op);
  m->dtype = static_cast<DataType>(dtype);
  m->reduction.op = static_cast<ReduceOp>(rop);
  m->device = static_cast<DeviceType>(device);
  m->cacheable = cacheable == 1;
  m->shape.resize(ndim);
  for (auto& d : m->shape) {
    if (!r.Get(&d) || d < 0) return false;
  }
  return r.GetString(&m->group, kMaxName) && r.Get(&m->group_size) && GetInts(r, &m->splits) &&
         r.GetString(&m->refused, kMaxError);
}

// Decodes into `out`, whose elements (and their strings' and vectors'
// capacity) are reused: get_one sets every field. `tail(r, count)` reads
// what follows the entries (false: malformed).
template <typename T, typename GetOne, typename Tail>
Status DecodeList(const uint8_t* data, size_t size, const char* what, GetOne get_one, Tail tail,
                  std::vector<T>* out) {
  Reader r(data, size);
  uint8_t version = 0;
  uint32_t count = 0;
  if (!r.Get(&version) || version != kVersion) {
    return InvalidArgument(std::string("engine ") + what + ": unknown version " +
                           std::to_string(version) + " (expected " + std::to_string(kVersion) +
                           ")");
  }
  if (!r.Get(&count) || count > r.left()) {
    return InvalidArgument(std::string("engine ") + what + ": bad entry count");
  }
  out->resize(count);
  for (uint32_t i = 0; i < count; ++i) {
    if (!get_one(r, &(*out)[i])) {
      return InvalidArgument(std::string("engine ") + what + ": entry " + std::to_string(i) +
                             " is truncated or malformed");
    }
  }
  if (!tail(r, count)) {
    return InvalidArgument(std::string("engine ") + what + ": its tail is truncated or malformed");
  }
  if (r.left() != 0) {
    return InvalidArgument(std::string("engine ") + what + ": " + std::to_string(r.left()) +
                           " trailing bytes");
  }
  return Status::Ok();
}

bool GetResponse(Reader& r, Response* out) {
  return GetMeta(r, &out->params) && r.GetString(&out->error, kMaxError) && GetInts(r, &out->rows);
}

}  // namespace

std::string UserName(const RequestMeta& m) {
  if (m.cacheable) return std::string(OpTypeName(m.op)) + " '" + m.name + "'";
  // (Only generated names are not cacheable: "allreduce.noname.3", this
  // rank's fourth unnamed allreduce, tells the user which call it is; a
  // barrier's or a join's tells nothing.)
  if (m.op == OpType::kBarrier || m.op == OpType::kJoin || m.name.empty()) {
    return OpTypeName(m.op);
  }
  return std::string(OpTypeName(m.op)) + " '" + m.name + "' (unnamed)";
}

const char* OpTypeName(OpType op) {
  switch (op) {
    case OpType::kAllreduce:
      return "allreduce";
    case OpType::kBroadcast:
      return "broadcast";
    case OpType::kBarrier:
      return "barrier";
    case OpType::kAllgather:
      return "allgather";
    case OpType::kReducescatter:
      return "reducescatter";
    case OpType::kAlltoall:
      return "alltoall";
    case OpType::kJoin:
      return "join";
  }
  return "?";
}

bool RequestMeta::SameParams(const RequestMeta& o) const {
  if (op == OpType::kAllgather || op == OpType::kAlltoall) {
    return op == o.op && dtype == o.dtype && device == o.device && group == o.group &&
           group_size == o.group_size && refused == o.refused && shape.size() == o.shape.size() &&
           std::equal(shape.begin() + (shape.empty() ? 0 : 1), shape.end(),
                      o.shape.begin() + (o.shape.empty() ? 0 : 1));
  }
  return op == o.op && dtype == o.dtype && shape == o.shape && root == o.root &&
         device == o.device && group == o.group && group_size == o.group_size &&
         refused == o.refused && reduction.op == o.reduction.op &&
         reduction.prescale_factor == o.reduction.prescale_factor &&
         reduction.postscale_factor == o.reduction.postscale_factor;
}

bool RequestMeta::TakeAllButNameAndShape(RequestMeta&& o) {
  // A field added to RequestMeta is compared and taken here too.
  static_assert(sizeof(RequestMeta) == 200, "a new field: take it in TakeAllButNameAndShape");
  if (op == o.op && dtype == o.dtype && reduction == o.reduction && root == o.root &&
      device == o.device && cacheable == o.cacheable && group == o.group &&
      group_size == o.group_size && splits == o.splits && refused == o.refused &&
      refused_code == o.refused_code) {
    return true;
  }
  refused = std::move(o.refused);
  refused_code = o.refused_code;
  op = o.op;
  dtype = o.dtype;
  reduction = o.reduction;
  root = o.root;
  device = o.device;
  cacheable = o.cacheable;
  group = std::move(o.group);
  group_size = o.group_size;
  splits = std::move(o.splits);
  return false;
}

bool Response::Matches(const RequestMeta& mine, int rank, int size) const {
  if (!params.SameParams(mine)) return false;
  const auto r = static_cast<size_t>(rank);
  const auto n = static_cast<size_t>(size);
  switch (mine.op) {
    case OpType::kAllgather:
      return rows.size() == n && rows[r] == (mine.shape.empty() ? 1 : mine.shape[0]);
    case OpType::kAlltoall:
      return rows.size() == n * n && mine.splits.size() == n &&
             std::equal(mine.splits.begin(), mine.splits.end(), rows.begin() + r * n);
    default:
      return true;
  }
}

std::string RequestMeta::DescribeParams() const {
  std::string s = std::string(DataTypeName(dtype)) + "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  s += "]";
  if (op == OpType::kAlltoall) {
    s += " splits [";
    for (size_t i = 0; i < splits.size(); ++i) s += (i ? ", " : "") + std::to_string(splits[i]);
    s += "]";
  }
  if (op == OpType::kAllreduce || op == OpType::kReducescatter) {
    s += std::string(" ") + ReduceOpName(reduction.op);
    if (reduction.prescale_factor != 1.0)
      s += " prescale " + std::to_string(reduction.prescale_factor);
    if (reduction.postscale_factor != 1.0)
      s += " postscale " + std::to_string(reduction.postscale_factor);
  } else if (op == OpType::kBroadcast) {
    s += " root " + std::to_string(root);
  }
  if (device == DeviceType::kCUDA) s += " on cuda";
  if (!group.empty()) s += " in group '" + group + "' of " + std::to_string(group_size);
  return s;
}

size_t RequestMeta::num_elements() const {
  size_t n = 1;
  for (int64_t d : shape) n *= static_cast<size_t>(d);
  return n;
}

size_t RequestMeta::row_elements() const {
  size_t n = 1;
  for (size_t i = 1; i < shape.size(); ++i) n *= static_cast<size_t>(shape[i]);
  return n;
}

size_t RequestMeta::num_bytes() const { return num_elements() * DataTypeSize(dtype); }

void EncodeRequests(const std::vector<RequestMeta>& requests, std::vector<uint8_t>* out,
                    const std::vector<uint32_t>* waited_ms) {
  Writer w(out);
  w.Put<uint8_t>(kVersion);
  w.Put<uint32_t>(static_cast<uint32_t>(requests.size()));
  for (const auto& m : requests) PutMeta(w, m);
  for (size_t i = 0; i < requests.size(); ++i) {
    w.Put<uint32_t>(waited_ms != nullptr && i < waited_ms->size() ? (*waited_ms)[i] : 0);
  }
}

Status DecodeRequests(const uint8_t* data, size_t size, std::vector<RequestMeta>* out,
                      std::vector<uint32_t>* waited_ms) {
  auto waits = [&](Reader& r, uint32_t count) {
    if (r.left() < size_t{count} * sizeof(uint32_t)) return false;
    if (waited_ms != nullptr) waited_ms->resize(count);
    for (uint32_t i = 0; i < count; ++i) {
      uint32_t ms = 0;
      r.Get(&ms);
      if (waited_ms != nullptr) (*waited_ms)[i] = ms;
    }
    return true;
  };
  return DecodeList(data, size, "request list", GetMeta, waits, out);
}

void EncodeResponses(const std::vector<Response>& responses, std::vector<uint8_t>* out) {
  Writer w(out);
  w.Put<uint8_t>(kVersion);
  w.Put<uint32_t>(static_cast<uint32_t>(responses.size()));
  for (const auto& r : responses) {
    PutMeta(w, r.params);
    w.PutString(r.error);
    PutInts(w, r.rows);
  }
}

Status DecodeResponses(const uint8_t* data, size_t size, std::vector<Response>* out) {
  return DecodeList(
      data, size, "response list", GetResponse, [](Reader&, uint32_t) { return true; }, out);
}

}  // namespace hora
