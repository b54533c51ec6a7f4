#pragma once

#include "soak/soak-faults.h"

/// The soak test's resource attackers (issue 14): clients that try to exhaust the daemon's
/// memory, disk, CPU or executors, beside its normal traffic. Each injection checks the answer
/// the limits promise (docs/operations.md, "Limits and what clients see") and records anything
/// else as a problem. Same signature as the other injectors (soak-faults.cc runs them).
/// Thread-safety: each call uses its own connections; 'counters' is thread-safe.

namespace qr::soak {

/// POSTs a multi-page query and never fetches it (the abandoned-query timeout ends it).
void NeverPoll(const FaultOptions& o, const StopSignal&, int i, FaultCounters* counters);
/// A row of 60 values of 16 MB: must fail with an INSUFFICIENT_RESOURCES error.
void WideRow(const FaultOptions& o, const StopSignal&, int i, FaultCounters* counters);
/// instr() on multi-MB strings: must finish with the right answer (linear time).
void InstrBomb(const FaultOptions& o, const StopSignal&, int i, FaultCounters* counters);
/// A sort far beyond the per-query spill quota: must fail with EXCEEDED_SPILL_LIMIT (or the
/// time limit, on a slow machine).
void HugeSort(const FaultOptions& o, const StopSignal&, int i, FaultCounters* counters);
/// Fetches one page, then GETs that answered page again and again: the same answer each
/// time; then cancels.
void ReGet(const FaultOptions& o, const StopSignal&, int i, FaultCounters* counters);

}  // namespace qr::soak
