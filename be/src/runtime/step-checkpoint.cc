#include "runtime/step-checkpoint.h"

namespace qr {
namespace {

struct Installed {
  StepCheckpoint::Fn fn = nullptr;
  void* arg = nullptr;
};
thread_local Installed installed;
/// Charge()'s bytes since its last check.
thread_local size_t charged = 0;

}  // namespace

StepCheckpoint::StepCheckpoint(Fn fn, void* arg) {
  installed = {fn, arg};
  charged = 0;
}

StepCheckpoint::~StepCheckpoint() { installed = {}; }

bool StepCheckpoint::Check() {
  return installed.fn != nullptr && installed.fn(installed.arg);
}

bool StepCheckpoint::Charge(size_t bytes) {
  charged += bytes;
  if (charged < kCheckpointBytes) return false;
  charged = 0;
  return Check();
}

}  // namespace qr
