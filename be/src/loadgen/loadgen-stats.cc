#include "loadgen/loadgen-stats.h"

#include <dirent.h>
#include <linux/perf_event.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

namespace qr::loadgen {

namespace {

constexpr int kSubBuckets = 64;  // per power of two
constexpr int kExactBelow = 128;
constexpr int kMaxExponent = 40;

bool ReadFile(const std::string& path, std::string* out) {
  std::ifstream in(path);
  if (!in) return false;
  std::ostringstream ss;
  ss << in.rdbuf();
  *out = ss.str();
  return true;
}

/// The number after "key:" in a /proc status file, or 0.
int64_t StatusField(const std::string& status, std::string_view key) {
  size_t pos = 0;
  while ((pos = status.find(key, pos)) != std::string::npos) {
    if ((pos == 0 || status[pos - 1] == '\n') && status.compare(pos + key.size(), 1, ":") == 0) {
      return std::strtoll(status.c_str() + pos + key.size() + 1, nullptr, 10);
    }
    pos += key.size();
  }
  return 0;
}

std::vector<int> ThreadIds(int pid) {
  std::vector<int> tids;
  std::string dir = "/proc/" + std::to_string(pid) + "/task";
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return tids;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] >= '0' && e->d_name[0] <= '9') tids.push_back(std::atoi(e->d_name));
  }
  closedir(d);
  return tids;
}

std::string ThreadGroupName(int pid, int tid) {
  std::string comm;
  ReadFile("/proc/" + std::to_string(pid) + "/task/" + std::to_string(tid) + "/comm", &comm);
  while (!comm.empty() && (comm.back() == '\n' || (comm.back() >= '0' && comm.back() <= '9'))) {
    comm.pop_back();
  }
  return comm.empty() ? "?" : comm;
}

/// utime and stime (clock ticks) of a whole process, dead threads included.
bool ReadCpuTicks(int pid, int64_t* utime, int64_t* stime) {
  std::string stat;
  if (!ReadFile("/proc/" + std::to_string(pid) + "/stat", &stat)) return false;
  size_t paren = stat.rfind(')');
  if (paren == std::string::npos) return false;
  std::istringstream fields(stat.substr(paren + 2));
  std::string skip;
  // Fields 3..13 (state .. cmajflt), then 14 utime and 15 stime.
  for (int i = 3; i <= 13; ++i) fields >> skip;
  fields >> *utime >> *stime;
  return static_cast<bool>(fields);
}

}  // namespace

Histogram::Histogram()
    : buckets_(kExactBelow + (kMaxExponent - 6) * kSubBuckets + kSubBuckets, 0) {}

size_t Histogram::Index(int64_t v) {
  if (v < kExactBelow) return static_cast<size_t>(std::max<int64_t>(v, 0));
  int e = std::min(63 - std::countl_zero(static_cast<uint64_t>(v)), kMaxExponent);
  int64_t sub = (v >> (e - 6)) & (kSubBuckets - 1);
  return kExactBelow + static_cast<size_t>(e - 7) * kSubBuckets + static_cast<size_t>(sub);
}

int64_t Histogram::BucketMid(size_t index) {
  if (index < kExactBelow) return static_cast<int64_t>(index);
  int e = 7 + static_cast<int>((index - kExactBelow) / kSubBuckets);
  int64_t sub = static_cast<int64_t>((index - kExactBelow) % kSubBuckets);
  int64_t low = (kSubBuckets + sub) << (e - 6);
  return low + ((int64_t{1} << (e - 6)) / 2);
}

void Histogram::Record(int64_t micros) {
  size_t i = std::min(Index(micros), buckets_.size() - 1);
  ++buckets_[i];
  ++count_;
  sum_ += micros;
  max_ = std::max(max_, micros);
}

void Histogram::Merge(const Histogram& other) {
  for (size_t i = 0; i < buckets_.size(); ++i) buckets_[i] += other.buckets_[i];
  count_ += other.count_;
  sum_ += other.sum_;
  max_ = std::max(max_, other.max_);
}

int64_t Histogram::Percentile(double q) const {
  if (count_ == 0) return 0;
  int64_t rank = std::max<int64_t>(1, static_cast<int64_t>(q * static_cast<double>(count_) + 0.5));
  int64_t seen = 0;
  for (size_t i = 0; i < buckets_.size(); ++i) {
    seen += buckets_[i];
    if (seen >= rank) return std::min(BucketMid(i), max_);
  }
  return max_;
}

const char* RequestKindName(RequestKind kind) {
  switch (kind) {
    case RequestKind::kPost: return "post";
    case RequestKind::kNext: return "next";
    case RequestKind::kStatus: return "status";
    case RequestKind::kCancel: return "cancel";
    case RequestKind::kGet: return "get";
    case RequestKind::kNumKinds: break;
  }
  return "?";
}

int64_t RunStats::total_requests() const {
  int64_t n = 0;
  for (const Histogram& h : requests) n += h.count();
  return n;
}

void RunStats::Merge(const RunStats& o) {
  for (int i = 0; i < static_cast<int>(RequestKind::kNumKinds); ++i) requests[i].Merge(o.requests[i]);
  queries.Merge(o.queries);
  cancels.Merge(o.cancels);
  unfinished.Merge(o.unfinished);
  for (const auto& [outcome, n] : o.attack_outcomes) attack_outcomes[outcome] += n;
  attack_requests += o.attack_requests;
  query_requests += o.query_requests;
  max_requests_per_query = std::max(max_requests_per_query, o.max_requests_per_query);
  rows += o.rows;
  response_bytes += o.response_bytes;
  statements_submitted += o.statements_submitted;
  expected_failures += o.expected_failures;
  long_query_resubmits += o.long_query_resubmits;
  cancel_followups_evicted += o.cancel_followups_evicted;
  connection_retries += o.connection_retries;
  for (const auto& [kind, n] : o.errors) errors[kind] += n;
  for (const auto& e : o.error_examples) {
    if (error_examples.size() < 10) error_examples.push_back(e);
  }
}

void RunStats::AddError(const std::string& kind, const std::string& detail) {
  ++errors[kind];
  if (error_examples.size() < 10) error_examples.push_back(kind + ": " + detail.substr(0, 300));
}

ProcSample ReadProcSample(const std::vector<int>& pids) {
  ProcSample s;
  const double ticks = static_cast<double>(sysconf(_SC_CLK_TCK));
  for (int pid : pids) {
    int64_t utime = 0, stime = 0;
    std::string status;
    if (!ReadCpuTicks(pid, &utime, &stime) ||
        !ReadFile("/proc/" + std::to_string(pid) + "/status", &status)) {
      s.error = "cannot read /proc/" + std::to_string(pid) + " (did the process exit?)";
      return s;
    }
    s.user_s += static_cast<double>(utime) / ticks;
    s.sys_s += static_cast<double>(stime) / ticks;
    s.rss_kb += StatusField(status, "VmRSS");
    s.hwm_kb += StatusField(status, "VmHWM");
    // /proc/<pid>/status counts the main thread's switches only: sum the threads.
    for (int tid : ThreadIds(pid)) {
      std::string ts;
      if (!ReadFile("/proc/" + std::to_string(pid) + "/task/" + std::to_string(tid) + "/status",
                    &ts)) {
        continue;  // the thread exited meanwhile
      }
      int64_t vol = StatusField(ts, "voluntary_ctxt_switches");
      int64_t invol = StatusField(ts, "nonvoluntary_ctxt_switches");
      s.voluntary_switches += vol;
      s.involuntary_switches += invol;
      s.switches_by_thread[ThreadGroupName(pid, tid)] += vol + invol;
      ++s.threads;
    }
  }
  s.ok = true;
  return s;
}

int64_t ReadRssKb(const std::vector<int>& pids) {
  int64_t kb = 0;
  for (int pid : pids) {
    std::string status;
    if (ReadFile("/proc/" + std::to_string(pid) + "/status", &status)) {
      kb += StatusField(status, "VmRSS");
    }
  }
  return kb;
}

SyscallCounter::~SyscallCounter() { Stop(); }

bool SyscallCounter::Start(const std::vector<int>& pids, std::string* error) {
  std::string id_text;
  if (!ReadFile("/sys/kernel/tracing/events/raw_syscalls/sys_enter/id", &id_text) &&
      !ReadFile("/sys/kernel/debug/tracing/events/raw_syscalls/sys_enter/id", &id_text)) {
    *error = "no tracefs (raw_syscalls:sys_enter id not readable)";
    return false;
  }
  perf_event_attr attr;
  memset(&attr, 0, sizeof(attr));
  attr.type = PERF_TYPE_TRACEPOINT;
  attr.size = sizeof(attr);
  attr.config = std::strtoull(id_text.c_str(), nullptr, 10);
  for (int pid : pids) {
    for (int tid : ThreadIds(pid)) {
      int fd = static_cast<int>(syscall(SYS_perf_event_open, &attr, tid, -1, -1, 0));
      if (fd < 0) {
        if (errno == ESRCH) continue;  // the thread exited meanwhile
        *error = std::string("perf_event_open: ") + strerror(errno) +
                 " (needs root or a low kernel.perf_event_paranoid)";
        Stop();
        return false;
      }
      fds_.push_back(fd);
    }
  }
  return true;
}

int64_t SyscallCounter::Read() const {
  if (fds_.empty()) return -1;
  int64_t total = 0;
  for (int fd : fds_) {
    uint64_t v = 0;
    if (read(fd, &v, sizeof(v)) == sizeof(v)) total += static_cast<int64_t>(v);
  }
  return total;
}

void SyscallCounter::Stop() {
  for (int fd : fds_) close(fd);
  fds_.clear();
}

}  // namespace qr::loadgen
