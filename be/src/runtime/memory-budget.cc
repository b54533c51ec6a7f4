#include "runtime/memory-budget.h"

#include <cstdio>
#include <utility>

namespace qr {

namespace {

/// Deletes a page and gives its bytes back to the budget.
struct AccountedPageDeleter {
  MemoryBudget* budget;
  int64_t bytes;
  void operator()(const std::string* page) const {
    delete page;
    if (budget != nullptr) budget->Release(bytes);
  }
};

}  // namespace

std::shared_ptr<const std::string> MakeAccountedPage(std::string text, int64_t reserved,
                                                     MemoryBudget* budget) {
  return std::shared_ptr<const std::string>(new std::string(std::move(text)),
                                            AccountedPageDeleter{budget, reserved});
}

std::string FormatBytes(int64_t bytes) {
  char buf[48];
  if (bytes < 1024) {
    std::snprintf(buf, sizeof(buf), "%lld bytes", static_cast<long long>(bytes));
  } else if (bytes < (int64_t{1} << 20)) {
    std::snprintf(buf, sizeof(buf), "%.1f KiB", bytes / 1024.0);
  } else if (bytes < (int64_t{1} << 30)) {
    std::snprintf(buf, sizeof(buf), "%.1f MiB", bytes / 1048576.0);
  } else {
    std::snprintf(buf, sizeof(buf), "%.2f GiB", bytes / 1073741824.0);
  }
  return buf;
}

}  // namespace qr
