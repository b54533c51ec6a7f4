#include "runtime/sqlite-heap.h"

#include <sqlite3.h>

#include <atomic>
#include <cstdlib>
#include <mutex>

#include "runtime/step-checkpoint.h"

namespace qr {
namespace {

/// Every block starts with its size (8 bytes, which keeps SQLite's 8-byte alignment), as
/// SQLite's own allocator (mem1.c) does: xSize and xFree need it and malloc_usable_size would
/// count glibc's slack.
constexpr int64_t kHeader = 8;

/// Each counter on its own cache line: all executors update the first on every allocation.
struct alignas(64) Counter {
  std::atomic<int64_t> value{0};
};
Counter g_used;
Counter g_peak;
Counter g_limit;
Counter g_refusals;
std::atomic<bool> g_installed{false};

int64_t Round8(int64_t n) { return (n + 7) & ~int64_t{7}; }

/// Reserves `bytes` more of the heap, or refuses them (over the limit).
bool Reserve(int64_t bytes) {
  const int64_t used = g_used.value.fetch_add(bytes, std::memory_order_relaxed) + bytes;
  const int64_t limit = g_limit.value.load(std::memory_order_relaxed);
  if (limit > 0 && used > limit) {
    g_used.value.fetch_sub(bytes, std::memory_order_relaxed);
    g_refusals.value.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  int64_t peak = g_peak.value.load(std::memory_order_relaxed);
  while (used > peak &&
         !g_peak.value.compare_exchange_weak(peak, used, std::memory_order_relaxed)) {
  }
  return true;
}

void Release(int64_t bytes) { g_used.value.fetch_sub(bytes, std::memory_order_relaxed); }

int64_t BlockSize(void* p) { return static_cast<int64_t*>(p)[-1]; }

void* HeapMalloc(int n) {
  if (n <= 0) return nullptr;
  // A stopped statement's allocations fail (StepCheckpoint::Allocating), so that SQLite's
  // built-ins and operators stop within a row.
  if (StepCheckpoint::Allocating(static_cast<size_t>(n))) return nullptr;
  const int64_t size = Round8(n);
  if (!Reserve(size + kHeader)) return nullptr;
  auto* block = static_cast<int64_t*>(std::malloc(static_cast<size_t>(size + kHeader)));
  if (block == nullptr) {
    Release(size + kHeader);
    return nullptr;
  }
  block[0] = size;
  return block + 1;
}

void HeapFree(void* p) {
  if (p == nullptr) return;
  const int64_t size = BlockSize(p);
  std::free(static_cast<int64_t*>(p) - 1);
  Release(size + kHeader);
}

/// SQLite calls it with a non-null block and a positive size (sqlite3Realloc handles the
/// rest); a refused or failed realloc leaves the block as it was.
void* HeapRealloc(void* p, int n) {
  const int64_t old_size = BlockSize(p);
  const int64_t size = Round8(n);
  const int64_t delta = size - old_size;
  // A growth copies the block: its whole new size counts as work.
  if (delta > 0 && StepCheckpoint::Allocating(static_cast<size_t>(n))) return nullptr;
  if (delta > 0 && !Reserve(delta)) return nullptr;
  auto* block = static_cast<int64_t*>(
      std::realloc(static_cast<int64_t*>(p) - 1, static_cast<size_t>(size + kHeader)));
  if (block == nullptr) {
    if (delta > 0) Release(delta);
    return nullptr;
  }
  if (delta < 0) Release(-delta);
  block[0] = size;
  return block + 1;
}

int HeapSize(void* p) { return p == nullptr ? 0 : static_cast<int>(BlockSize(p)); }
int HeapRoundup(int n) { return static_cast<int>(Round8(n)); }
int HeapInit(void*) { return SQLITE_OK; }
void HeapShutdown(void*) {}

const sqlite3_mem_methods kMethods = {HeapMalloc, HeapFree,  HeapRealloc,  HeapSize,
                                      HeapRoundup, HeapInit, HeapShutdown, nullptr};

}  // namespace

Status InstallSqliteHeap() {
  static std::once_flag once;
  static int rc = SQLITE_OK;
  std::call_once(once, [] {
    rc = sqlite3_config(SQLITE_CONFIG_MALLOC, &kMethods);
    if (rc != SQLITE_OK) return;
    rc = sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
    if (rc != SQLITE_OK) {
      // Unreachable in practice (the first call succeeded, so SQLite is not initialized);
      // the allocator is installed either way, and SQLite's statistics would stay on.
      return;
    }
    g_installed.store(true, std::memory_order_release);
  });
  if (rc != SQLITE_OK) {
    return Internal(std::string("SQLite's allocator could not be replaced (") +
                    sqlite3_errstr(rc) + "): SQLite was initialized first");
  }
  return Status::OK();
}

bool SqliteHeapInstalled() { return g_installed.load(std::memory_order_acquire); }

void SetSqliteHeapLimit(int64_t bytes) {
  if (SqliteHeapInstalled()) {
    g_limit.value.store(bytes, std::memory_order_relaxed);
  } else {
    sqlite3_hard_heap_limit64(bytes);
  }
}

int64_t SqliteHeapLimit() {
  return SqliteHeapInstalled() ? g_limit.value.load(std::memory_order_relaxed)
                               : sqlite3_hard_heap_limit64(-1);
}

int64_t SqliteHeapUsed() {
  return SqliteHeapInstalled() ? g_used.value.load(std::memory_order_relaxed)
                               : sqlite3_memory_used();
}

int64_t SqliteHeapPeak() {
  return SqliteHeapInstalled() ? g_peak.value.load(std::memory_order_relaxed)
                               : sqlite3_memory_highwater(0);
}

void ResetSqliteHeapPeak() {
  if (SqliteHeapInstalled()) {
    g_peak.value.store(g_used.value.load(std::memory_order_relaxed), std::memory_order_relaxed);
  } else {
    sqlite3_memory_highwater(1);
  }
}

int64_t SqliteHeapRefusals() { return g_refusals.value.load(std::memory_order_relaxed); }

}  // namespace qr
