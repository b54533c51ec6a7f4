#!/usr/bin/env bash
# ctest boost-peer-symbols: boost-peer.cc's object (Boost 1.88) shares no global symbol with
# the other inputs of process-wide-locks-benchmark (its other objects, the project's static
# libraries, the system Boost 1.74 libraries it links), so the linker can neither merge a
# Boost 1.88 inline function with another object's copy nor resolve one of its references
# there; and it references no Boost symbol that it does not define itself.
#   boost-peer-symbols-test.sh BOOST_PEER_OBJECT OBJECT_DIR LIBRARY...
set -euo pipefail
peer=$1
objdir=$2
shift 2
work=$(mktemp -d /tmp/qr-boost-peer-symbols.XXXXXX)
trap 'rm -rf "$work"' EXIT

# Global symbols the peer defines (weak or strong), and Boost symbols it leaves undefined.
nm -g --defined-only "$peer" | awk '{print $3}' | sort -u > "$work/peer"
undefined=$(nm -u "$peer" | awk '{print $2}' | c++filt | grep -i boost || true)
# Everything else that goes into the link.
others=()
while IFS= read -r o; do
  [ "$o" -ef "$peer" ] || others+=("$o")
done < <(find "$objdir" -name '*.o')
[ ${#others[@]} -gt 0 ] || { echo "FAIL: no other objects under $objdir"; exit 1; }
for lib in "$@"; do others+=("$lib"); done
for o in "${others[@]}"; do
  case "$o" in
    *.so*) nm -D --defined-only "$o" 2>/dev/null ;;
    *) nm -g --defined-only "$o" 2>/dev/null ;;
  esac
done | awk 'NF >= 3 {print $3}' | sort -u > "$work/others"
shared=$(comm -12 "$work/peer" "$work/others" | c++filt | grep -i boost || true)
if [ -n "$shared$undefined" ]; then
  echo "FAIL: Boost symbols of $peer met elsewhere"
  echo "defined here and elsewhere:"; echo "$shared"
  echo "undefined here:"; echo "$undefined"
  exit 1
fi
local_syms=$(nm "$peer" | c++filt | grep -c 'boost::unordered' || true)
global_boost=$(c++filt < "$work/peer" | grep -ci boost || true)
# The check must have looked at something: the peer does contain the map's code.
[ "$local_syms" -gt 0 ] || { echo "FAIL: no boost::unordered symbol in $peer"; exit 1; }
echo "OK: $local_syms boost::unordered symbols in the peer ($global_boost global, none of them" \
     "defined by the ${#others[@]} other inputs), no undefined Boost symbol"
