#include "runtime/query-exec-mgr.h"

#include <chrono>
#include <utility>

#include <glog/logging.h>

namespace qr {

QueryStateHandle& QueryStateHandle::operator=(QueryStateHandle&& o) noexcept {
  if (this != &o) {
    Reset();
    mgr_ = o.mgr_;
    qs_ = o.qs_;
    o.qs_ = nullptr;
  }
  return *this;
}

void QueryStateHandle::Reset() {
  if (qs_ != nullptr) {
    mgr_->ReleaseQueryState(qs_);
    qs_ = nullptr;
  }
}

QueryStateHandle QueryStateHandle::Clone() const {
  if (qs_ == nullptr) return QueryStateHandle();
  QueryState* again = mgr_->GetQueryState(qs_->query_id());
  DCHECK_EQ(again, qs_) << "a live handle's QueryState must still be registered";
  return QueryStateHandle(mgr_, again);
}

QueryExecMgr::QueryExecMgr(int num_shards) : registry_(num_shards) {}

QueryExecMgr::~QueryExecMgr() {
  DCHECK_EQ(registry_.Count(), 0u) << "QueryExecMgr destroyed with live QueryStates";
}

Status QueryExecMgr::CreateQueryState(const UniqueId& id, QueryContext ctx, QueryState** out) {
  // Built outside the shard's writer lock; the lock only guards the insertion.
  QueryState* qs = registry_.TryCreate(id, std::move(ctx));
  if (qs == nullptr) return AlreadyExists(PrintId(id) + " is already registered");
  created_.fetch_add(1, std::memory_order_relaxed);
  *out = qs;
  return Status::OK();
}

Status QueryExecMgr::CreateQueryState(const UniqueId& id, QueryContext ctx,
                                      QueryStateHandle* out) {
  QueryState* qs = nullptr;
  QR_RETURN_IF_ERROR(CreateQueryState(id, std::move(ctx), &qs));
  *out = QueryStateHandle(this, qs);
  return Status::OK();
}

QueryStateHandle QueryExecMgr::GetQueryStateHandle(const UniqueId& id) {
  return QueryStateHandle(this, GetQueryState(id));
}

void QueryExecMgr::CountRelease() {
  // Counted under drain_lock_ and this thread's last use of the manager: a WaitForDrain() that
  // sees every state released lets its caller destroy the manager at once, so no release may
  // still be about to touch it (counting before the lock, or waiting on the registry's count,
  // left such a window).
  MutexLock l(&drain_lock_);
  released_.fetch_add(1, std::memory_order_relaxed);
  if (drain_waiters_ > 0) drained_.NotifyAll();
}

std::vector<QueryStateHandle> QueryExecMgr::GetAll() {
  std::vector<QueryStateHandle> out;
  out.reserve(registry_.Count() + 16);
  // Take a reference to each under its shard's writer lock: the reference is a CAS on the
  // state's count, so the walk excludes only the writers of one shard at a time and no lookup
  // (the callback does no allocation beyond the reserved vector's occasional growth). Act on
  // the states after the locks are released.
  registry_.ForEachReferenced([&](QueryState* qs) { out.emplace_back(this, qs); });
  return out;
}

int QueryExecMgr::CancelAll(const QueryError& reason) {
  return CancelIf([](const QueryState&) { return true; }, reason);
}

int QueryExecMgr::CancelIf(const std::function<bool(const QueryState&)>& pred,
                           const QueryError& reason) {
  int n = 0;
  for (QueryStateHandle& h : GetAll()) {
    if (pred(*h.get()) && h->Cancel(reason)) ++n;
  }
  return n;
}

bool QueryExecMgr::WaitForDrain(int64_t timeout_ms) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  MutexLock l(&drain_lock_);
  // Every state created has been released, and each release finished under this lock. A
  // released state was created before it (its creation happens before its last release), so
  // reading 'released_' first never sees more releases than creations.
  auto drained = [this] {
    const int64_t released = released_.load(std::memory_order_relaxed);
    return created_.load(std::memory_order_relaxed) == released;
  };
  ++drain_waiters_;
  while (!drained()) {
    if (!drained_.WaitUntil(&drain_lock_, deadline) && !drained()) break;
  }
  --drain_waiters_;
  return drained();
}

}  // namespace qr
