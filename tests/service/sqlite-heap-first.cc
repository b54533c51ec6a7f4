// Installs the accounting allocator of SQLite's heap before anything in the test process
// initializes SQLite, as coordinatord's start does: the servers the tests start run with the
// daemon's allocator, its limit and its checkpoints (runtime/sqlite-heap.h,
// StepCheckpoint::Allocating). Without it, the first use of SQLite in the process (a fixture's
// database) would leave SQLite's own allocator in place for the whole binary.
#include "runtime/sqlite-heap.h"

namespace {

const bool installed = qr::InstallSqliteHeap().ok();

}  // namespace
