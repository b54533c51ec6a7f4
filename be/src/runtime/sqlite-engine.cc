#include "runtime/sqlite-engine.h"

#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <utility>

#include <glog/logging.h>

#include "runtime/deadline-watchdog.h"
#include "runtime/long-query-gate.h"
#include "runtime/query-runner.h"
#include "runtime/sqlite-connection.h"
#include "util/futex.h"

namespace qr {

namespace {

/// Ends a query that never ran (cancelled while queued, or refused at shutdown).
void FinishUnstarted(QueryState* query, const QueryError& reason) {
  query->Cancel(reason);
  std::optional<QueryError> actual = query->cancel_reason();
  query->set_exec_state(QueryState::ExecState::kCancelled);
  query->result_buffer()->Finish(actual ? std::move(*actual) : reason);
}

}  // namespace

struct SqliteEngine::Impl {
  explicit Impl(int max_long_queries_per_user) : gate(max_long_queries_per_user) {}
  void ExecutorLoop(int index, SqliteConnection* conn, const Options& options);
  /// Starts the executor thread of slot 'index'.
  void StartExecutor(int index, const Options* options);

  /// Protects the queue and the bookkeeping below; held only for O(1) work (and, in the
  /// destructor, for cancelling the running queries). Never held while running SQL.
  /// Lock order: before a QueryState's and a ResultBuffer's locks.
  mutable Mutex lock;
  std::deque<QueryStateHandle> queue QR_GUARDED_BY(lock);
  /// Queries being executed; each pointer is kept alive by its executor's handle.
  std::vector<QueryState*> running QR_GUARDED_BY(lock);
  /// Executors waiting for work, the one that went idle last at the back (woken first: its
  /// stack and connection are the likeliest to be in cache). Execute() takes one off and
  /// wakes that one only, so a thread already awake is never woken.
  std::vector<int> idle QR_GUARDED_BY(lock);
  /// Each executor's wake word, on a cache line of its own: an idle executor sleeps in the
  /// kernel until it changes (Wake()). Not a condition variable: glibc's (2.36)
  /// pthread_cond_signal can block the signalling thread, an HTTP I/O thread, until
  /// previously woken waiters have run, and behind demoted long queries that took
  /// milliseconds (docs/benchmarks.md, "The executors' wake-up").
  struct alignas(64) WakeWord {
    std::atomic<uint32_t> word{0};
  };
  std::unique_ptr<WakeWord[]> wake_words;
  /// Wakes executor 'index', taken off 'idle' by the caller (under 'lock'); called without
  /// the lock, so that the woken thread does not wait for it.
  void Wake(int index) {
    std::atomic<uint32_t>* w = &wake_words[static_cast<size_t>(index)].word;
    // Release: pairs with the executor's acquire load (the queue itself is under 'lock').
    w->fetch_add(1, std::memory_order_release);
    internal::Futex(w, FUTEX_WAKE, 1);
  }
  bool shutting_down QR_GUARDED_BY(lock) = false;
  /// One per thread, each used only by its thread once the threads run.
  std::vector<std::unique_ptr<SqliteConnection>> connections;
  /// Written by Create(), then only by the demoter's thread (respawns) until it is stopped,
  /// then by the destructor.
  std::vector<std::thread> threads;
  /// Created before the threads, stopped before they are joined.
  std::unique_ptr<LongQueryDemoter> demoter;
  /// Interrupts statements at their time limit; outlives the threads.
  DeadlineWatchdog deadlines;
  /// Where a user's long queries beyond Options::max_long_queries_per_user wait their turn.
  LongQueryGate gate;
};

void SqliteEngine::Impl::ExecutorLoop(int index, SqliteConnection* conn,
                                      const Options& options) {
  std::atomic<uint32_t>* const wake_word = &wake_words[static_cast<size_t>(index)].word;
  demoter->ExecutorStarted();
  for (;;) {
    QueryStateHandle query;
    uint32_t seen = 0;
    {
      MutexLock l(&lock);
      if (!queue.empty()) {
        query = std::move(queue.front());
        queue.pop_front();
        running.push_back(query.get());
      } else if (shutting_down) {
        return;
      } else {
        // Read under the lock: a Wake() for this entry comes after it is taken off 'idle'
        // under the lock, so it changes the word after this read.
        seen = wake_word->load(std::memory_order_relaxed);
        idle.push_back(index);
      }
    }
    if (!query) {
      // Until Execute() or the destructor takes this executor off 'idle' and wakes it (the
      // loop: a spurious return of FUTEX_WAIT). Then the queue again: another executor
      // finishing its query may have taken the work first.
      while (wake_word->load(std::memory_order_acquire) == seen) {
        internal::Futex(wake_word, FUTEX_WAIT, seen);
      }
      continue;
    }
    demoter->Begin(index);
    RunQuery(conn, query.get(), options, &deadlines, &gate);
    {
      MutexLock l(&lock);
      running.erase(std::find(running.begin(), running.end(), query.get()));
    }
    // 'query' drops the engine's reference here, with no lock held.
    query.Reset();
    // A thread that cannot regain its priority ends; the demoter starts its replacement.
    if (!demoter->End(index)) return;
  }
}

void SqliteEngine::Impl::StartExecutor(int index, const Options* options) {
  SqliteConnection* conn = connections[static_cast<size_t>(index)].get();
  if (threads[static_cast<size_t>(index)].joinable()) threads[static_cast<size_t>(index)].join();
  threads[static_cast<size_t>(index)] =
      std::thread([this, index, conn, options] { ExecutorLoop(index, conn, *options); });
  // Named here, not by the new thread itself: the name is there when Create() returns (a
  // thread not yet scheduled would otherwise still carry its creator's name).
  char name[16];
  std::snprintf(name, sizeof(name), "qr-exec-%d", index);
  pthread_setname_np(threads[static_cast<size_t>(index)].native_handle(), name);
}

SqliteEngine::SqliteEngine(Options options)
    : options_(std::move(options)),
      impl_(std::make_unique<Impl>(options_.max_long_queries_per_user)) {}

Status SqliteEngine::Create(const Options& options, std::unique_ptr<SqliteEngine>* out) {
  if (options.num_threads < 1) {
    return InvalidArgument("the engine needs at least one executor thread, got " +
                           std::to_string(options.num_threads));
  }
  std::unique_ptr<SqliteEngine> engine(new SqliteEngine(options));
  Impl* impl = engine->impl_.get();
  for (int i = 0; i < options.num_threads; ++i) {
    std::unique_ptr<SqliteConnection> conn;
    QR_RETURN_IF_ERROR(SqliteConnection::Open(options.database_path, &conn, options.catalog_name,
                                               options.max_value_bytes));
    if (options.system_tables != nullptr) conn->EnableSystemTables(options.system_tables);
    impl->connections.push_back(std::move(conn));
  }
  const Options* opts = &engine->options_;
  impl->demoter = std::make_unique<LongQueryDemoter>(
      options.long_query, options.num_threads,
      [impl, opts](int index) { impl->StartExecutor(index, opts); });
  impl->threads.resize(static_cast<size_t>(options.num_threads));
  impl->wake_words = std::make_unique<Impl::WakeWord[]>(static_cast<size_t>(options.num_threads));
  for (int i = 0; i < options.num_threads; ++i) impl->StartExecutor(i, opts);
  LOG(INFO) << "SQLite engine serving '" << options.database_path << "' read-only with "
            << options.num_threads << " executor threads (" << EngineVersionString() << ")";
  if (impl->demoter->enabled()) {
    LOG(INFO) << "An executor running a query for longer than " << options.long_query.after_ms
              << " ms (--long_query_after_ms) runs at " << impl->demoter->DemotedDescription()
              << " instead of nice " << impl->demoter->base_nice() << " until the query ends";
  }
  if (impl->gate.enabled() && options.long_query.after_ms > 0) {
    LOG(INFO) << "At most " << impl->gate.per_user() << " queries of one user running for "
              << "longer than " << options.long_query.after_ms << " ms run at once "
              << "(--max_long_queries_per_user); the others wait for a turn";
  }
  *out = std::move(engine);
  return Status::OK();
}

SqliteEngine::~SqliteEngine() {
  std::deque<QueryStateHandle> queued;
  std::vector<int> idle;
  {
    MutexLock l(&impl_->lock);
    impl_->shutting_down = true;
    queued.swap(impl_->queue);
    idle.swap(impl_->idle);
    // Cancel() only sets a flag and closes the buffer (leaf locks, see the lock order).
    for (QueryState* query : impl_->running) query->Cancel(QueryError::UserCanceled());
  }
  for (int index : idle) impl_->Wake(index);
  for (QueryStateHandle& query : queued) FinishUnstarted(query.get(), QueryError::UserCanceled());
  queued.clear();
  if (impl_->demoter) impl_->demoter->Stop();  // no respawn from here on (null: Create failed)
  for (std::thread& t : impl_->threads) {
    if (t.joinable()) t.join();
  }
}

void SqliteEngine::Execute(QueryStateHandle query) {
  DCHECK(query);
  QueryState* const qs = query.get();
  qs->set_exec_state(QueryState::ExecState::kQueued);
  int wake = -1;
  {
    MutexLock l(&impl_->lock);
    if (!impl_->shutting_down) {
      impl_->queue.push_back(std::move(query));
      if (!impl_->idle.empty()) {
        wake = impl_->idle.back();
        impl_->idle.pop_back();
      }
    }
  }
  if (query) {  // not queued: the engine is shutting down
    FinishUnstarted(qs, QueryError::ShuttingDown("The server is shutting down"));
    return;
  }
  if (wake >= 0) impl_->Wake(wake);
}

int64_t SqliteEngine::num_queued() const {
  MutexLock l(&impl_->lock);
  return static_cast<int64_t>(impl_->queue.size());
}

int64_t SqliteEngine::num_demoted() const { return impl_->demoter->num_demoted(); }

int64_t SqliteEngine::num_executors_replaced() const { return impl_->demoter->num_replaced(); }

int64_t SqliteEngine::num_deadline_interrupts() const { return impl_->deadlines.num_fired(); }

int64_t SqliteEngine::num_long_query_parks() const { return impl_->gate.num_parks(); }

int64_t SqliteEngine::num_long_queries_parked() const { return impl_->gate.num_parked(); }

int64_t SqliteEngine::num_running() const {
  MutexLock l(&impl_->lock);
  return static_cast<int64_t>(impl_->running.size());
}

}  // namespace qr
