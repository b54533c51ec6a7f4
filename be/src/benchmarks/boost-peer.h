#pragma once

// process-wide-locks-benchmark's boost::concurrent_flat_map peer. It is compiled in
// boost-peer.cc alone, against the Boost 1.88 headers of the pinned PyPI wheel
// (scripts/fetch-boost-headers.sh), so that it never meets the Debian Boost 1.74 the rest of
// the binary uses: this header includes no Boost header, and everything boost-peer.cc
// instantiates has internal linkage (the build checks with nm that the two share no symbol).
// Built only when CMake finds those headers (QR_HAVE_BOOST_CFM).

namespace qr::bench {

struct Variant;

/// The BoostConcurrentFlatMap variant: boost::concurrent_flat_map<UniqueId, const Entry*>
/// (Boost 1.88), lookups with cvisit, the project's UniqueIdHash.
Variant MakeBoostConcurrentFlatMapVariant();

}  // namespace qr::bench
