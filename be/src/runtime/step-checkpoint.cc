#include "runtime/step-checkpoint.h"

namespace qr {
namespace {

struct Installed {
  StepCheckpoint::Fn fn = nullptr;
  void* arg = nullptr;
};
thread_local Installed installed;

}  // namespace

StepCheckpoint::StepCheckpoint(Fn fn, void* arg) { installed = {fn, arg}; }

StepCheckpoint::~StepCheckpoint() { installed = {}; }

bool StepCheckpoint::Check() {
  return installed.fn != nullptr && installed.fn(installed.arg);
}

}  // namespace qr
