#include "benchmarks/bench-harness.h"

#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <deque>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <utility>

#include <glog/logging.h>

namespace qr::bench {

std::vector<int> ParseInts(const std::string& list) {
  std::vector<int> out;
  std::stringstream in(list);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (!item.empty()) out.push_back(std::stoi(item));
  }
  return out;
}

std::vector<std::string> ParseNames(const std::string& list) {
  std::vector<std::string> out;
  std::stringstream in(list);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

namespace {

/// Length of every thread's sequence (it is replayed cyclically).
constexpr size_t kSequenceLength = size_t{1} << 16;

/// Threads wait here until all of them have started, so thread creation is never timed.
class StartGate {
 public:
  void ArriveAndWait() {
    ready_.fetch_add(1, std::memory_order_release);
    ready_.notify_one();
    // Acquire: pairs with Open() so the workload written before it is visible.
    while (!open_.load(std::memory_order_acquire)) open_.wait(false, std::memory_order_acquire);
  }
  void WaitAllArrived(int n) {
    int r;
    while ((r = ready_.load(std::memory_order_acquire)) < n) ready_.wait(r);
  }
  void Open() {
    open_.store(true, std::memory_order_release);
    open_.notify_all();
  }

 private:
  std::atomic<int> ready_{0};
  std::atomic<bool> open_{false};
};

double WriteFraction(Mix mix) {
  switch (mix) {
    case Mix::kReadHeavy: return 0.06;
    case Mix::kChurn: return 0.50;
    default: return 0.0;
  }
}

uint32_t Op(OpKind kind, size_t key) {
  CHECK_LE(key, kOpKeyMask);
  return (static_cast<uint32_t>(kind) << kOpKindShift) | static_cast<uint32_t>(key);
}

/// Thread 't''s sequence. 'h' = ring keys per thread that start present (see Workload).
std::vector<uint32_t> MakeSequence(const Workload& w, int t, size_t h, uint64_t hot_key) {
  std::mt19937_64 rng(0x9e3779b97f4a7c15ULL * (t + 1) + static_cast<uint64_t>(w.mix));
  std::uniform_int_distribution<size_t> any_live(0, w.entries - 1);
  std::vector<uint32_t> seq(kSequenceLength);
  const size_t ring = 2 * h;
  size_t writes = 0;
  if (double f = WriteFraction(w.mix); f > 0) {
    // A multiple of 2 * ring: as many Adds as Deletes, each a whole number of ring turns.
    writes = std::max<size_t>(1, std::llround(kSequenceLength * f / (2.0 * ring))) * 2 * ring;
  }
  std::vector<bool> is_write(kSequenceLength, false);
  std::fill(is_write.begin(), is_write.begin() + writes, true);
  std::shuffle(is_write.begin(), is_write.end(), rng);

  std::deque<size_t> present, absent;
  for (size_t i = 0; i < h; ++i) {
    present.push_back(t * h + i);
    absent.push_back(w.entries + t * h + i);
  }
  bool delete_next = true;
  for (size_t i = 0; i < kSequenceLength; ++i) {
    if (!is_write[i]) {
      seq[i] = Op(kOpGet, w.mix == Mix::kHotQuery ? hot_key : any_live(rng));
    } else if (delete_next) {
      seq[i] = Op(kOpDelete, present.front());
      absent.push_back(present.front());
      present.pop_front();
      delete_next = false;
    } else {
      seq[i] = Op(kOpAdd, absent.front());
      present.push_back(absent.front());
      absent.pop_front();
      delete_next = true;
    }
  }
  return seq;
}

}  // namespace

const char* MixName(Mix mix) {
  switch (mix) {
    case Mix::kLookupOnly: return "LookupOnly";
    case Mix::kReadHeavy: return "ReadHeavy";
    case Mix::kChurn: return "Churn";
    case Mix::kHotQuery: return "HotQuery";
  }
  return "?";
}

std::vector<UniqueId> MakeKeys(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<UniqueId> keys(n);
  for (UniqueId& k : keys) {
    k.hi = rng();
    k.lo = rng() & ~uint64_t{0xffffffff};
  }
  return keys;
}

namespace {
int hot_key_offset = 0;
}  // namespace

void SetHotKeyOffset(int offset) { hot_key_offset = offset; }

const Workload& GetWorkload(Mix mix, int threads, int entries) {
  static std::unique_ptr<Workload> cached;
  if (cached && cached->mix == mix && cached->threads == threads && cached->entries == entries) {
    return *cached;
  }
  cached.reset();  // free the previous one first: they can be large
  auto w = std::make_unique<Workload>();
  w->mix = mix;
  w->threads = threads;
  w->entries = entries;
  // Ring keys per thread: at most 16, and all rings' present halves fit in the live keys.
  const size_t h = std::clamp<size_t>(entries / (2 * threads), 1, 16);
  CHECK_LE(h * threads, static_cast<size_t>(entries));
  // Same seed for every point: the live keys of a given size are the same everywhere.
  w->keys = MakeKeys(entries + h * threads, 0x5eed0000 + entries);
  w->values.resize(w->keys.size());
  for (size_t i = 0; i < w->keys.size(); ++i) w->values[i] = Entry{w->keys[i], i};
  const uint64_t hot_key =
      static_cast<uint64_t>(((entries / 2 + hot_key_offset) % entries + entries) % entries);
  w->ops.resize(threads);
  for (int t = 0; t < threads; ++t) w->ops[t] = MakeSequence(*w, t, h, hot_key);
  cached = std::move(w);
  return *cached;
}

ProcessUsage GetProcessUsage() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  ProcessUsage u;
  u.context_switches = static_cast<uint64_t>(ru.ru_nvcsw) + static_cast<uint64_t>(ru.ru_nivcsw);
  u.cpu_seconds = static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
                  static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6;
  return u;
}

namespace {
void SetUsageDelta(const ProcessUsage& before, RoundResult* r) {
  const ProcessUsage after = GetProcessUsage();
  r->context_switches = after.context_switches - before.context_switches;
  r->cpu_seconds = after.cpu_seconds - before.cpu_seconds;
}
}  // namespace

RoundResult RunTimedRound(int threads, std::chrono::nanoseconds duration,
                          const std::function<uint64_t(int, const std::atomic<bool>&)>& body,
                          const std::function<void(int)>& prepare) {
  StartGate gate;
  std::atomic<bool> stop{false};
  std::vector<uint64_t> ops(threads, 0);
  std::vector<std::thread> pool;
  pool.reserve(threads);
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      if (prepare) prepare(t);
      gate.ArriveAndWait();
      ops[t] = body(t, stop);
    });
  }
  gate.WaitAllArrived(threads);
  RoundResult r;
  const ProcessUsage before = GetProcessUsage();
  const auto t0 = std::chrono::steady_clock::now();
  gate.Open();
  std::this_thread::sleep_for(duration);
  stop.store(true, std::memory_order_relaxed);
  const auto t1 = std::chrono::steady_clock::now();
  for (std::thread& th : pool) th.join();
  SetUsageDelta(before, &r);
  r.seconds = std::chrono::duration<double>(t1 - t0).count();
  for (uint64_t n : ops) r.ops += n;
  return r;
}

RoundResult RunThreadsToCompletion(int threads, const std::function<void(int)>& body) {
  StartGate gate;
  // The last body to finish stamps the end: thread exit and join are not part of the work.
  std::atomic<int> running{threads};
  std::chrono::steady_clock::time_point t1;
  std::vector<std::thread> pool;
  pool.reserve(threads);
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      gate.ArriveAndWait();
      body(t);
      if (running.fetch_sub(1, std::memory_order_acq_rel) == 1) {
        t1 = std::chrono::steady_clock::now();
      }
    });
  }
  gate.WaitAllArrived(threads);
  RoundResult r;
  const ProcessUsage before = GetProcessUsage();
  const auto t0 = std::chrono::steady_clock::now();
  gate.Open();
  for (std::thread& th : pool) th.join();
  SetUsageDelta(before, &r);
  r.seconds = std::chrono::duration<double>(t1 - t0).count();
  return r;
}

void ReportThroughput(const Totals& totals, benchmark::State* state) {
  const double ops = static_cast<double>(totals.ops);
  state->counters["ops_per_s"] = totals.seconds > 0 ? ops / totals.seconds : 0;
  state->counters["ns_per_op"] = ops > 0 ? totals.seconds * 1e9 / ops : 0;
  state->counters["ctx_switches_per_op"] =
      ops > 0 ? static_cast<double>(totals.context_switches) / ops : 0;
  state->counters["cpu_ns_per_op"] = ops > 0 ? totals.cpu_seconds * 1e9 / ops : 0;
}

void SetThreadNice(int nice) {
  if (nice != GetThreadNice()) setpriority(PRIO_PROCESS, static_cast<id_t>(gettid()), nice);
}

int GetThreadNice() {
  return getpriority(PRIO_PROCESS, static_cast<id_t>(gettid()));
}

bool SetThreadRealtime() {
  sched_param param{};
  param.sched_priority = sched_get_priority_min(SCHED_FIFO);
  return pthread_setschedparam(pthread_self(), SCHED_FIFO, &param) == 0;
}

namespace {

/// The first two CPUs of the process's affinity mask (-1 where missing).
std::pair<int, int> TwoAllowedCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::pair<int, int> cpus{-1, -1};
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (!CPU_ISSET(c, &set)) continue;
    if (cpus.first < 0) {
      cpus.first = c;
    } else {
      cpus.second = c;
      break;
    }
  }
  return cpus;
}

void PinTo(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

inline void CpuPause() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

}  // namespace

CacheLineRoundTrip MeasureCacheLineRoundTrip(int batches, int round_trips) {
  CacheLineRoundTrip r;
  std::tie(r.cpu_a, r.cpu_b) = TwoAllowedCpus();
  if (r.cpu_b < 0) return r;
  // The line: odd values are the ping's, even ones the pong's answers; kDone ends the pong.
  struct alignas(128) Line {
    std::atomic<uint64_t> value{0};
  };
  constexpr uint64_t kDone = ~uint64_t{0};
  Line line;
  std::vector<double> ns_per_trip;
  std::thread pong([&] {
    PinTo(r.cpu_b);
    uint64_t seen = 0;
    for (;;) {
      uint64_t v;
      while ((v = line.value.load(std::memory_order_acquire)) == seen) CpuPause();
      if (v == kDone) return;
      seen = v + 1;
      line.value.store(seen, std::memory_order_release);
    }
  });
  std::thread ping([&] {
    PinTo(r.cpu_a);
    uint64_t v = 0;
    for (int b = 0; b < batches; ++b) {
      const auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < round_trips; ++i) {
        line.value.store(++v, std::memory_order_release);
        ++v;
        while (line.value.load(std::memory_order_acquire) != v) CpuPause();
      }
      const auto t1 = std::chrono::steady_clock::now();
      ns_per_trip.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count() /
                            round_trips);
    }
    line.value.store(kDone, std::memory_order_release);
  });
  ping.join();
  pong.join();
  std::nth_element(ns_per_trip.begin(), ns_per_trip.begin() + ns_per_trip.size() / 2,
                   ns_per_trip.end());
  r.ns = ns_per_trip[ns_per_trip.size() / 2];
  return r;
}

namespace {
std::atomic<double> placement_far_ns{150};
}  // namespace

void SetPlacementFarNs(double ns) { placement_far_ns.store(ns, std::memory_order_relaxed); }
double PlacementFarNs() { return placement_far_ns.load(std::memory_order_relaxed); }

const char* PlacementName(double round_trip_ns) {
  if (round_trip_ns <= 0) return "n/a";
  return round_trip_ns < PlacementFarNs() ? "near" : "far";
}

void ReportPlacement(const CacheLineRoundTrip& before, const CacheLineRoundTrip& after,
                     benchmark::State* state) {
  state->counters["rtt_before_ns"] = before.ns;
  state->counters["rtt_after_ns"] = after.ns;
  const std::string a = PlacementName(before.ns);
  const std::string b = PlacementName(after.ns);
  state->counters["placement_far"] = (a == "far") * 0.5 + (b == "far") * 0.5;
  state->SetLabel("placement:" + (a == b ? a : std::string("mixed")));
}

double Quantile(std::vector<uint32_t>* samples, double q) {
  if (samples->empty()) return 0;
  size_t k = std::min(samples->size() - 1, static_cast<size_t>(q * samples->size()));
  std::nth_element(samples->begin(), samples->begin() + k, samples->end());
  return (*samples)[k];
}

}  // namespace qr::bench
