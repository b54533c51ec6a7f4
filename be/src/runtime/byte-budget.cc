#include "runtime/byte-budget.h"

#include <glog/logging.h>

namespace qr {

bool ReserveWithin(std::atomic<int64_t>* used, int64_t limit, int64_t bytes, int64_t* before) {
  int64_t seen = used->load(std::memory_order_relaxed);
  do {
    if (seen + bytes > limit) {
      *before = seen;
      return false;
    }
  } while (!used->compare_exchange_weak(seen, seen + bytes, std::memory_order_relaxed));
  *before = seen;
  return true;
}

void RaisePeak(std::atomic<int64_t>* peak, int64_t value) {
  int64_t seen = peak->load(std::memory_order_relaxed);
  while (value > seen &&
         !peak->compare_exchange_weak(seen, value, std::memory_order_relaxed)) {
  }
}

bool ByteBudget::TryReserve(int64_t bytes) {
  DCHECK_GE(bytes, 0);
  int64_t before;
  if (!ReserveWithin(&used_bytes_, limit_bytes_, bytes, &before)) {
    refusals_.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  RaisePeak(&peak_bytes_, before + bytes);
  return true;
}

void ByteBudget::Reserve(int64_t bytes) {
  DCHECK_GE(bytes, 0);
  RaisePeak(&peak_bytes_, used_bytes_.fetch_add(bytes, std::memory_order_relaxed) + bytes);
}

void ByteBudget::Release(int64_t bytes) {
  DCHECK_GE(bytes, 0);
  const int64_t before = used_bytes_.fetch_sub(bytes, std::memory_order_relaxed);
  DCHECK_GE(before, bytes) << "released more bytes than were reserved";
}

}  // namespace qr
