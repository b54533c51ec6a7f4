#pragma once

#include <cstddef>
#include <cstdint>

#include "runtime/step-checkpoint.h"

/// Substring search for our SQL functions (instr, replace), linear in the haystack and with a
/// StepCheckpoint::Check() every kCheckpointBytes of it, so that a search in a 16 MiB value
/// (one VM step: glibc's memmem took ~33 ms for 8 MiB of 'a' and a 4 MiB needle of 'a's and
/// a 'b') yields the CPU of a long query and stops on a cancel within a fraction of a
/// millisecond.
///  - A needle of at most kShortNeedle bytes: memmem() (glibc's two-way and SIMD searches) on
///    windows of kCheckpointBytes candidate positions; each window re-reads at most
///    kShortNeedle - 1 bytes of the next (under 2%).
///  - A longer needle: Rabin-Karp, a rolling polynomial hash modulo 2^61 - 1 with a random
///    base chosen per process (so no input is adversarial for it: a false hit has
///    probability about needle length / 2^61 per position), each hit verified by memcmp().
/// Thread-safety: none needed (no shared state but the process's base, set once).

namespace qr {

constexpr size_t kShortNeedle = 1024;

/// The offset of the first occurrence of needle[0, m) (m > 0) in hay[0, n); SIZE_MAX if
/// none, or if 'checkpoints' said stop (then checkpoints->stopped()).
size_t FindBytes(const unsigned char* hay, size_t n, const unsigned char* needle, size_t m,
                 WorkCheckpoints* checkpoints);

}  // namespace qr
