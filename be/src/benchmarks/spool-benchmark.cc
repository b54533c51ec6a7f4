// The result spool's I/O path (docs/benchmarks.md, "Result spool"): writes --mb MiB of
// encoded pages through a ResultBuffer whose memory buffer is full (so every page goes to the
// spool file), reads them back in order, and reports MB/s of each direction, system calls per
// MB (reads include the fallocate calls that punch what was read) and context switches per
// MB. Compare with dd on the same directory (scripts/bench-spool.sh).

#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>

#include <gflags/gflags.h>

#include "runtime/result-buffer.h"
#include "runtime/spill-accounting.h"
#include "runtime/spool-file.h"

DEFINE_string(dir, "/tmp", "Directory of the spool file (the daemon's --spill_dir).");
DEFINE_int32(mb, 512, "MiB written and read back.");
DEFINE_int32(page_kb, 256, "Size of each page (the engine's page_max_bytes is 256 KiB).");

namespace qr {
namespace {

using Clock = std::chrono::steady_clock;

int64_t ContextSwitches() {
  rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_nvcsw + ru.ru_nivcsw;
}

struct Phase {
  double seconds;
  int64_t calls;
  int64_t switches;
};

void Report(const char* what, const Phase& p, double mb) {
  printf("%-6s %8.1f MB/s  %6.2f syscalls/MB  %6.3f context switches/MB  (%.0f MiB in %.3f s)\n",
         what, mb / p.seconds, p.calls / mb, p.switches / mb, mb, p.seconds);
}

int Run() {
  SpillBudget budget(int64_t{1} << 50);
  auto account = std::make_shared<SpillAccount>(&budget, int64_t{1} << 50);
  const int64_t page_bytes = int64_t{FLAGS_page_kb} << 10;
  const int64_t pages = (int64_t{FLAGS_mb} << 20) / page_bytes;
  // One row per page and a memory buffer of one page: every later page is spooled.
  ResultBuffer buf(1, 1);
  buf.EnableSpooling(FLAGS_dir, account, nullptr);
  auto text = std::make_shared<const std::string>(page_bytes, 'x');
  SpoolFile::Stats& stats = SpoolFile::stats();

  Clock::time_point start = Clock::now();
  int64_t calls = stats.write_calls.load(), switches = ContextSwitches();
  for (int64_t i = 0; i < pages; ++i) {
    if (!buf.Put(ResultPage{text, 1, 8})) return 1;
  }
  buf.Finish(std::nullopt);
  Phase write{std::chrono::duration<double>(Clock::now() - start).count(),
              stats.write_calls.load() - calls, ContextSwitches() - switches};

  start = Clock::now();
  // Reading back includes punching what was read out of the file (one fallocate per MiB).
  calls = stats.read_calls.load() + stats.punch_calls.load();
  switches = ContextSwitches();
  ResultPage page;
  std::optional<QueryError> error;
  int64_t read = 0;
  while (buf.TryGet(&page, &error) == ResultBuffer::Next::kPage) ++read;
  Phase back{std::chrono::duration<double>(Clock::now() - start).count(),
             stats.read_calls.load() + stats.punch_calls.load() - calls,
             ContextSwitches() - switches};
  if (read != pages || error) {
    fprintf(stderr, "read %lld of %lld pages%s\n", static_cast<long long>(read),
            static_cast<long long>(pages), error ? (": " + error->message).c_str() : "");
    return 1;
  }
  const double mb = static_cast<double>(pages * page_bytes) / (1 << 20);
  Report("write", write, mb);
  Report("read", back, mb);
  return 0;
}

}  // namespace
}  // namespace qr

int main(int argc, char** argv) {
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  return qr::Run();
}
