// process_* and qr_build_info samples of GET /metrics, read from /proc and getrusage(), and the
// allocator's qr_allocator_* (glibc's mallinfo2()).

#include <dirent.h>
#include <malloc.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "service/metrics-format.h"
#include "service/version.h"

namespace qr::metrics {
namespace {

/// The fields of /proc/self/stat after the command name: [0] is field 3 (state).
std::vector<std::string> ProcSelfStatFields() {
  std::ifstream in("/proc/self/stat");
  std::string line;
  std::getline(in, line);
  std::vector<std::string> fields;
  const size_t paren = line.rfind(')');
  if (paren == std::string::npos) return fields;
  std::istringstream rest(line.substr(paren + 1));
  for (std::string f; rest >> f;) fields.push_back(f);
  return fields;
}

/// The process's start, in seconds since the epoch: boot time (/proc/stat btime) plus its
/// start in clock ticks after boot (/proc/self/stat field 22); -1 if unreadable.
double ProcessStartTimeSeconds() {
  std::ifstream stat("/proc/stat");
  int64_t btime = -1;
  for (std::string key; stat >> key;) {
    if (key == "btime") {
      stat >> btime;
      break;
    }
    stat.ignore(std::numeric_limits<std::streamsize>::max(), '\n');
  }
  const std::vector<std::string> f = ProcSelfStatFields();
  if (btime < 0 || f.size() < 20) return -1;
  return static_cast<double>(btime) +
         std::strtod(f[19].c_str(), nullptr) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

int64_t OpenFileDescriptors() {
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return -1;
  int64_t n = 0;
  while (const dirent* e = readdir(dir)) n += e->d_name[0] != '.';
  closedir(dir);
  return n - 1;  // the directory's own descriptor
}

std::string Decimal(double v) {
  char buf[32];
  snprintf(buf, sizeof(buf), "%.3f", v);
  return buf;
}

// Sanitizer builds replace malloc: glibc's arenas, which mallinfo2() describes, are then not
// where the process's memory is.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kGlibcMalloc = false;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || \
    __has_feature(memory_sanitizer)
constexpr bool kGlibcMalloc = false;
#else
constexpr bool kGlibcMalloc = true;
#endif
#else
constexpr bool kGlibcMalloc = true;
#endif

/// What glibc's malloc holds: the bytes handed out (arena chunks in use plus blocks mapped on
/// their own, which coordinatord's mallopt(M_MMAP_THRESHOLD) makes every block of 1 MiB and
/// more) and the free bytes its arenas keep. RSS minus these two is the binary, the stacks and what is not malloc's.
/// mallinfo2() walks every arena's free lists under its lock: tens of microseconds.
void AppendAllocatorMetrics(std::string* out) {
  if constexpr (!kGlibcMalloc) return;
  const struct mallinfo2 mi = mallinfo2();
  Scalar("qr_allocator_in_use_bytes", "gauge",
         "Bytes malloc has handed out and not had back (arena chunks in use plus blocks mapped "
         "on their own).",
         static_cast<int64_t>(mi.uordblks + mi.hblkhd), out);
  Scalar("qr_allocator_free_bytes", "gauge",
         "Free bytes malloc's arenas keep for later allocations (part of the RSS, not in use).",
         static_cast<int64_t>(mi.fordblks), out);
}
}  // namespace

/// The standard process_* families (the names Prometheus' client libraries use), the
/// allocator's and the build's version and revision.
void AppendProcessMetrics(std::string* out) {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  const double cpu = ru.ru_utime.tv_sec + ru.ru_stime.tv_sec +
                     (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
  Family("process_cpu_seconds_total", "counter", "User and system CPU time spent, in seconds.",
         out);
  Sample("process_cpu_seconds_total", "", Decimal(cpu), out);
  int64_t size_pages = 0, resident_pages = 0;
  std::ifstream statm("/proc/self/statm");
  statm >> size_pages >> resident_pages;
  const int64_t page = sysconf(_SC_PAGESIZE);
  Scalar("process_resident_memory_bytes", "gauge", "Resident memory size in bytes.",
         resident_pages * page, out);
  Scalar("process_virtual_memory_bytes", "gauge", "Virtual memory size in bytes.",
         size_pages * page, out);
  Scalar("process_open_fds", "gauge", "Open file descriptors.", OpenFileDescriptors(), out);
  rlimit nofile{};
  getrlimit(RLIMIT_NOFILE, &nofile);
  Scalar("process_max_fds", "gauge", "The soft limit on open file descriptors.",
         nofile.rlim_cur == RLIM_INFINITY ? -1 : static_cast<int64_t>(nofile.rlim_cur), out);
  const std::vector<std::string> stat = ProcSelfStatFields();
  Scalar("process_threads", "gauge", "Threads of the process.",
         stat.size() > 17 ? std::strtoll(stat[17].c_str(), nullptr, 10) : -1, out);
  static const double start_time = ProcessStartTimeSeconds();
  Family("process_start_time_seconds", "gauge",
         "Start time of the process since the Unix epoch, in seconds.", out);
  Sample("process_start_time_seconds", "", Decimal(start_time), out);
  AppendAllocatorMetrics(out);
  Family("qr_build_info", "gauge", "The running build: version and git revision (always 1).",
         out);
  Sample("qr_build_info",
         std::string("{version=\"") + QR_VERSION + "\",revision=\"" + QR_GIT_REVISION + "\"}",
         1, out);
}

}  // namespace qr::metrics
