#pragma once

// Test hooks of ShardLock's read bias that its users never need (not installed with the
// library's public headers).

#include <cstddef>

namespace qr::internal {

/// The threads' read-biased hold records now in use (owned by a live thread, or, in the child
/// of a fork(), kept because their thread was inside a read-biased lookup at the fork).
size_t BiasedReadersInUse();

}  // namespace qr::internal
