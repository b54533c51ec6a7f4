#include "runtime/long-query-demoter.h"

#include <sched.h>
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/query-runner.h"
#include "runtime/sample-db.h"
#include "runtime/sqlite-engine.h"
#include "runtime/thread-schedule.h"
#include "runtime-test-util.h"

namespace qr {
namespace {

using qr::testing::Drain;
using qr::testing::ScopedTempDir;
using qr::testing::Submit;
using ExecState = QueryState::ExecState;

constexpr const char* kEndless =
    "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c";

int NiceOf(pid_t tid) {
  errno = 0;
  int nice = getpriority(PRIO_PROCESS, static_cast<id_t>(tid));
  EXPECT_EQ(errno, 0) << "getpriority(" << tid << ")";
  return nice;
}

/// The nice value of each of this process's threads whose name starts with 'prefix', by name.
std::map<std::string, int> NiceByThreadName(const std::string& prefix) {
  std::map<std::string, int> out;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream comm(entry.path() / "comm");
    std::string name;
    std::getline(comm, name);
    if (name.rfind(prefix, 0) != 0) continue;
    out[name] = NiceOf(static_cast<pid_t>(std::stol(entry.path().filename().string())));
  }
  return out;
}

/// Whether this process may lower a nice value again (root, CAP_SYS_NICE or RLIMIT_NICE).
bool CanRestorePriority() {
  bool ok = false;
  std::thread([&] {
    const pid_t tid = gettid();
    const int base = NiceOf(tid);
    if (base >= 19 || setpriority(PRIO_PROCESS, static_cast<id_t>(tid), base + 1) != 0) return;
    ok = setpriority(PRIO_PROCESS, static_cast<id_t>(tid), base) == 0;
  }).join();
  return ok;
}

TEST(LongQueryDemoterTest, LongQueryIsDemotedAndGetsItsPriorityBack) {
  std::atomic<int> respawned{0};
  LongQueryDemoter demoter({/*after_ms=*/1, /*nice_increment=*/5}, 2,
                           [&](int) { respawned.fetch_add(1); });
  ASSERT_TRUE(demoter.enabled());
  EXPECT_EQ(demoter.demoted_nice(), std::min(19, demoter.base_nice() + 5));
  const bool can_restore = CanRestorePriority();
  std::thread executor([&] {
    const pid_t tid = gettid();
    EXPECT_EQ(NiceOf(tid), demoter.base_nice());
    demoter.Begin(1);
    // The "query" runs until the demoter has acted on it.
    ASSERT_TRUE(WaitFor([&] { return demoter.num_demoted() == 1; }));
    EXPECT_EQ(NiceOf(tid), demoter.demoted_nice());
    const bool kept = demoter.End(1);
    EXPECT_EQ(kept, can_restore);
    if (kept) {
      EXPECT_EQ(NiceOf(tid), demoter.base_nice());
    }
  });
  executor.join();
  if (!can_restore) {
    ASSERT_TRUE(WaitFor([&] { return respawned.load() == 1; }));
    EXPECT_EQ(demoter.num_replaced(), 1);
  } else {
    EXPECT_EQ(respawned.load(), 0);
  }
  EXPECT_EQ(demoter.num_demoted(), 1);
}

// Options::slice_us: an executor asks for the short slice when it starts, goes back to the
// kernel's default slice when demoted (so that short queries' executors preempt it), and
// gets the short slice back with its priority.
TEST(LongQueryDemoterTest, ExecutorsRunWithTheShortSliceUntilDemoted) {
  LongQueryDemoter::Options options;
  options.after_ms = 1;
  options.nice_increment = 5;
  options.slice_us = 250;
  LongQueryDemoter demoter(options, 1, [](int) {});
  const bool can_restore = CanRestorePriority();
  std::thread executor([&] {
    const pid_t tid = gettid();
    demoter.ExecutorStarted();
    int nice = 0;
    uint64_t slice_ns = 0;
    if (!GetFairSchedule(tid, &nice, &slice_ns)) {
      GTEST_SKIP() << "sched_getattr is not available here: " << std::strerror(errno);
    }
    if (slice_ns != 250000) {
      // Linux before 6.12 accepts the call and ignores the slice.
      GTEST_SKIP() << "this kernel does not keep custom SCHED_OTHER slices (reports "
                   << slice_ns << " ns)";
    }
    EXPECT_EQ(nice, demoter.base_nice());
    demoter.Begin(0);
    ASSERT_TRUE(WaitFor([&] { return demoter.num_demoted() == 1; }));
    ASSERT_TRUE(GetFairSchedule(tid, &nice, &slice_ns));
    EXPECT_EQ(nice, demoter.demoted_nice());
    EXPECT_NE(slice_ns, 250000u) << "a demoted executor has the kernel's default slice";
    EXPECT_GT(slice_ns, 250000u);
    if (demoter.End(0)) {
      ASSERT_TRUE(can_restore);
      ASSERT_TRUE(GetFairSchedule(tid, &nice, &slice_ns));
      EXPECT_EQ(nice, demoter.base_nice());
      EXPECT_EQ(slice_ns, 250000u);
    }
  });
  executor.join();
}

int PolicyOf(pid_t tid) {
  const int policy = sched_getscheduler(tid);
  EXPECT_GE(policy, 0) << "sched_getscheduler(" << tid << ")";
  return policy & ~SCHED_RESET_ON_FORK;
}

/// Whether this process may leave SCHED_IDLE again (root, CAP_SYS_NICE or RLIMIT_NICE).
bool CanLeaveIdle() {
  bool ok = false;
  std::thread([&] {
    sched_param param{};
    if (sched_setscheduler(0, SCHED_IDLE, &param) != 0) return;
    ok = sched_setscheduler(0, SCHED_OTHER, &param) == 0;
  }).join();
  return ok;
}

// Policy::kIdle: the long query's executor runs under SCHED_IDLE, its nice value untouched,
// and gets SCHED_OTHER back when the query ends (or is replaced when it cannot).
TEST(LongQueryDemoterTest, IdlePolicyRunsTheLongQueryUnderSchedIdle) {
  std::atomic<int> respawned{0};
  LongQueryDemoter::Options options{/*after_ms=*/1, /*nice_increment=*/10};
  options.policy = LongQueryDemoter::Policy::kIdle;
  LongQueryDemoter demoter(options, 1, [&](int) { respawned.fetch_add(1); });
  ASSERT_TRUE(demoter.enabled());
  EXPECT_EQ(demoter.demoted_nice(), demoter.base_nice());
  EXPECT_EQ(demoter.DemotedDescription(), "SCHED_IDLE");
  const bool can_restore = CanLeaveIdle();
  std::thread executor([&] {
    const pid_t tid = gettid();
    EXPECT_EQ(PolicyOf(tid), SCHED_OTHER);
    demoter.Begin(0);
    ASSERT_TRUE(WaitFor([&] { return demoter.num_demoted() == 1; }));
    EXPECT_EQ(PolicyOf(tid), SCHED_IDLE);
    EXPECT_EQ(NiceOf(tid), demoter.base_nice());
    const bool kept = demoter.End(0);
    EXPECT_EQ(kept, can_restore);
    if (kept) {
      EXPECT_EQ(PolicyOf(tid), SCHED_OTHER);
    }
  });
  executor.join();
  if (!can_restore) {
    ASSERT_TRUE(WaitFor([&] { return respawned.load() == 1; }));
  } else {
    EXPECT_EQ(respawned.load(), 0);
  }
  // A short query is not demoted.
  demoter.Begin(0);
  EXPECT_TRUE(demoter.End(0));
  EXPECT_EQ(demoter.num_demoted(), 1);
}

TEST(LongQueryDemoterTest, ShortQueriesKeepTheirPriority) {
  LongQueryDemoter demoter({/*after_ms=*/60'000, /*nice_increment=*/10}, 1, [](int) {});
  for (int i = 0; i < 1000; ++i) {
    demoter.Begin(0);
    EXPECT_TRUE(demoter.End(0));
  }
  EXPECT_EQ(demoter.num_demoted(), 0);
  EXPECT_EQ(NiceOf(gettid()), demoter.base_nice());
}

TEST(LongQueryDemoterTest, ThreadThatCannotRestoreIsReplacedAtBasePriority) {
  std::atomic<int> respawned_slot{-1};
  std::atomic<int> respawner_nice{-100};
  LongQueryDemoter demoter({/*after_ms=*/1, /*nice_increment=*/3, /*never_restore=*/true}, 3,
                           [&](int slot) {
                             respawner_nice.store(NiceOf(gettid()));
                             respawned_slot.store(slot);
                           });
  std::thread executor([&] {
    demoter.Begin(2);
    ASSERT_TRUE(WaitFor([&] { return demoter.num_demoted() == 1; }));
    EXPECT_FALSE(demoter.End(2));
  });
  executor.join();
  ASSERT_TRUE(WaitFor([&] { return respawned_slot.load() == 2; }));
  // The replacement is started by a thread at the base priority, which it inherits.
  EXPECT_EQ(respawner_nice.load(), demoter.base_nice());
  ASSERT_TRUE(WaitFor([&] { return demoter.num_replaced() == 1; }));
}

TEST(LongQueryDemoterTest, DisabledDemoterStartsNoThreadAndDemotesNothing) {
  LongQueryDemoter off_by_time({/*after_ms=*/0, /*nice_increment=*/10}, 1, [](int) {});
  LongQueryDemoter off_by_nice({/*after_ms=*/1, /*nice_increment=*/0}, 1, [](int) {});
  EXPECT_FALSE(off_by_time.enabled());
  EXPECT_FALSE(off_by_nice.enabled());
  EXPECT_TRUE(NiceByThreadName("qr-demoter").empty());
  off_by_nice.Begin(0);
  EXPECT_TRUE(off_by_nice.End(0));
  EXPECT_EQ(off_by_nice.num_demoted(), 0);
}

class EngineDemotionTest : public ::testing::TestWithParam<bool> {
 protected:
  static void SetUpTestSuite() {
    dir_ = new ScopedTempDir();
    ASSERT_TRUE(EnsureSampleDatabase(dir_->path(), 0.001, &sample_path_).ok());
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  /// Runs 'sql', a statement of a few VM instructions (far fewer than the progress handler's
  /// 1,000), on one executor that yields every 10 us, and expects rows 'rows_json' and at
  /// least 'min_yields' yields, which then came from checks inside the statement's calls.
  /// Demotion off (after_ms = 0): an executor yields demoted or not, and at nice 7 beside a
  /// busy test run it could wait far longer than its ~1.5 s of CPU under ThreadSanitizer.
  void ExpectYieldsWithinOneRow(const std::string& sql, int64_t max_value_bytes,
                                const std::string& rows_json, int64_t min_yields) {
    SqliteEngine::Options options;
    options.database_path = sample_path_;
    options.num_threads = 1;
    options.long_query = {/*after_ms=*/0, /*nice_increment=*/7};
    options.long_query.yield_us = 10;
    options.max_value_bytes = max_value_bytes;
    std::unique_ptr<SqliteEngine> engine;
    ASSERT_TRUE(SqliteEngine::Create(options, &engine).ok());
    const int64_t before = LongQueryYields();
    auto q = Submit(&mgr_, engine.get(), sql);
    const qr::testing::QueryOutcome out = Drain(q);
    ASSERT_TRUE(out.ended);
    EXPECT_EQ(out.state, ExecState::kFinished);
    EXPECT_EQ(out.RowsJson(), rows_json);
    EXPECT_GE(LongQueryYields(), before + min_yields);
  }

  static ScopedTempDir* dir_;
  static std::string sample_path_;
  QueryExecMgr mgr_{16};
};

ScopedTempDir* EngineDemotionTest::dir_ = nullptr;
std::string EngineDemotionTest::sample_path_;

// A long query's executor runs at the demoted priority while the query runs; afterwards every
// executor is back at the base priority (restored, or replaced by a new thread when the
// process may not lower a nice value), and the engine runs queries on all its threads.
TEST_P(EngineDemotionTest, LongQueryExecutorIsDemotedThenRestoredOrReplaced) {
  const bool never_restore = GetParam();
  SqliteEngine::Options options;
  options.database_path = sample_path_;
  options.num_threads = 2;
  options.long_query = {/*after_ms=*/5, /*nice_increment=*/7, never_restore};
  std::unique_ptr<SqliteEngine> engine;
  ASSERT_TRUE(SqliteEngine::Create(options, &engine).ok());
  const int base = NiceOf(gettid());
  const int demoted = std::min(19, base + 7);

  auto q = Submit(&mgr_, engine.get(), kEndless);
  ASSERT_TRUE(WaitFor([&] { return engine->num_demoted() == 1; }));
  std::map<std::string, int> nices = NiceByThreadName("qr-exec-");
  ASSERT_EQ(nices.size(), 2u);
  int at_demoted = 0;
  for (const auto& [name, nice] : nices) at_demoted += nice == demoted ? 1 : 0;
  EXPECT_EQ(at_demoted, 1);
  EXPECT_TRUE(q->Cancel(QueryError::UserCanceled()));
  ASSERT_TRUE(WaitFor([&] { return q->exec_state() == ExecState::kCancelled; }));

  const bool replaced = never_restore || !CanRestorePriority();
  if (replaced) {
    ASSERT_TRUE(WaitFor([&] { return engine->num_executors_replaced() == 1; }));
  }
  ASSERT_TRUE(WaitFor([&] {
    std::map<std::string, int> now = NiceByThreadName("qr-exec-");
    if (now.size() != 2) return false;
    for (const auto& [name, nice] : now) {
      if (nice != base) return false;
    }
    return true;
  }));
  EXPECT_EQ(engine->num_executors_replaced(), replaced ? 1 : 0);
  // Both executors (the replacement included) run queries: two at once.
  auto a = Submit(&mgr_, engine.get(), kEndless);
  auto b = Submit(&mgr_, engine.get(), kEndless);
  ASSERT_TRUE(WaitFor([&] {
    return a->exec_state() == ExecState::kRunning && b->exec_state() == ExecState::kRunning;
  }));
  a->Cancel(QueryError::UserCanceled());
  b->Cancel(QueryError::UserCanceled());
  EXPECT_TRUE(Drain(a).ended);
  EXPECT_TRUE(Drain(b).ended);
}

// Options::yield_us: the executor of a running query yields the CPU between VM steps,
// repeatedly, demoted or not (after_ms = 0: demotion off); with 0 it never does, however long
// the query runs.
TEST_F(EngineDemotionTest, LongQueryExecutorYieldsTheCpu) {
  for (const auto& [after_ms, yield_us] :
       {std::pair{5, 0}, std::pair{5, 100}, std::pair{0, 100}}) {
    SCOPED_TRACE(std::to_string(after_ms) + " ms, " + std::to_string(yield_us) + " us");
    SqliteEngine::Options options;
    options.database_path = sample_path_;
    options.num_threads = 1;
    options.long_query = {after_ms, /*nice_increment=*/7};
    options.long_query.yield_us = yield_us;
    std::unique_ptr<SqliteEngine> engine;
    ASSERT_TRUE(SqliteEngine::Create(options, &engine).ok());
    const int64_t before = LongQueryYields();
    auto q = Submit(&mgr_, engine.get(), kEndless);
    if (after_ms > 0) {
      ASSERT_TRUE(WaitFor([&] { return engine->num_demoted() == 1; }));
    }
    if (yield_us > 0) {
      ASSERT_TRUE(WaitFor([&] { return LongQueryYields() >= before + 10; }));
    } else {
      // 50 ms of CPU: ten times the point where it became long.
      ASSERT_TRUE(WaitFor([&] { return q->cpu_time_ns.load() > 50'000'000; }));
      EXPECT_EQ(LongQueryYields(), before);
    }
    EXPECT_TRUE(q->Cancel(QueryError::UserCanceled()));
    EXPECT_TRUE(Drain(q).ended);
  }
}

TEST_F(EngineDemotionTest, LongQueryYieldsWithinOneLongFunctionCall) {
  // The yields can only come from the checkpoints inside printf() and instr()
  // (runtime/step-checkpoint.h). Work that sanitizers slow down little: block copies and a
  // Rabin-Karp search (not 16M calls). Values past the default --max_value_mb, so that each
  // call runs long.
  ExpectYieldsWithinOneRow(
      "SELECT instr(printf('%.*c', 16000000, 'a'), printf('%.*c', 2000, 'a') || 'b')",
      int64_t{16} << 20, "[[0]]", 2);
}

TEST_F(EngineDemotionTest, LongQueryYieldsBetweenTheJsonCallsOfOneRow) {
  // Eight JSON parses of distinct 1 MiB texts: SQLite checks nothing between the calls of one
  // row, so the yields can only come from the checks the json_* overrides make before each
  // large call (sqlite-guarded-functions.h). Built with hex() and zeroblob(), which have no
  // checkpoints of their own.
  std::string sum = "json_valid(x)";
  for (int i = 1; i < 8; ++i) sum += " + json_valid(x || '" + std::string(i, ' ') + "')";
  ExpectYieldsWithinOneRow(
      "SELECT " + sum + " FROM (SELECT '\"' || hex(zeroblob(524288)) || '\"' AS x)",
      SqliteConnection::kDefaultMaxValueBytes, "[[8]]", 4);
}

INSTANTIATE_TEST_SUITE_P(RestoreOrReplace, EngineDemotionTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? "NeverRestore" : "Default";
                         });

}  // namespace
}  // namespace qr
