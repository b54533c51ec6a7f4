#include "runtime/step-checkpoint.h"

#include <atomic>

namespace qr {
namespace {

struct Installed {
  StepCheckpoint::Fn fn = nullptr;
  void* arg = nullptr;
};
thread_local Installed installed;
/// Charge()'s bytes since its last check.
thread_local size_t charged = 0;
/// Allocating()'s bytes since its last check, and whether a check said stop.
thread_local size_t allocated = 0;
thread_local bool refusing = false;
std::atomic<int64_t> allocations_refused{0};

}  // namespace

StepCheckpoint::StepCheckpoint(Fn fn, void* arg) {
  installed = {fn, arg};
  charged = 0;
  allocated = 0;
  refusing = false;
}

StepCheckpoint::~StepCheckpoint() {
  installed = {};
  refusing = false;
}

bool StepCheckpoint::Check() {
  return installed.fn != nullptr && installed.fn(installed.arg, /*may_yield=*/true);
}

bool StepCheckpoint::Charge(size_t bytes) {
  charged += bytes;
  if (charged < kCheckpointBytes) return false;
  charged = 0;
  return Check();
}

bool StepCheckpoint::Allocating(size_t bytes) {
  if (installed.fn == nullptr) return false;
  if (!refusing) {
    allocated += bytes;
    if (allocated < kCheckpointBytes) return false;
    allocated = 0;
    refusing = installed.fn(installed.arg, /*may_yield=*/false);
    if (!refusing) return false;
  }
  allocations_refused.fetch_add(1, std::memory_order_relaxed);
  return true;
}

int64_t StepCheckpoint::AllocationsRefused() {
  return allocations_refused.load(std::memory_order_relaxed);
}

}  // namespace qr
