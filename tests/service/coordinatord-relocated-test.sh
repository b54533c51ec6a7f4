#!/usr/bin/env bash
# coordinatord runs from anywhere (issue 16): the binary copied alone to a temporary directory
# serves /queries and every asset of be/www from its compiled-in copy (byte for byte, with its
# content type), started with the example flag file; the binary does not name be/www; and
# `cmake --install` into a temporary prefix yields a daemon that answers --version, its
# password tool, and a systemd unit that `systemd-analyze verify` accepts (when installed).
#   coordinatord-relocated-test.sh COORDINATORD SOURCE_DIR BUILD_DIR CMAKE
set -uo pipefail
daemon=$1
source_dir=$2
build_dir=$3
cmake=$4
source "$source_dir/tests/testutil/daemon-test-lib.sh"
qr_test_init relocated-test

# 1. The binary alone, elsewhere.
mkdir -p "$work/bin" "$work/run"
cp "$daemon" "$work/bin/coordinatord"
if strings -a "$work/bin/coordinatord" | grep -qF "$source_dir/be/www"; then
  fail "the binary contains the path $source_dir/be/www"
fi
echo "ok: the binary does not contain $source_dir/be/www"

# The example flag file, then what this test needs (later flags win).
cd "$work/run" || fail "cd $work/run"
# Bounded: 120 s (the sample database is generated first).
qr_start_daemon 120 "$work/bin/coordinatord" --flagfile="$source_dir/packaging/coordinatord.flags" \
  --http_port=0 --data_dir="$work/run/data" --spill_dir="$work/run/spill" \
  --sample_scale_factor=0.001
base="http://127.0.0.1:$port"

# fetch PATH: the body into $work/body, prints "STATUS CONTENT-TYPE".
fetch() {
  curl -s -o "$work/body" -w '%{http_code} %{content_type}' "$base$1"
}
got=$(fetch /queries)
[ "${got%% *}" = 200 ] || fail "GET /queries answered $got: $(head -c 300 "$work/body")"
grep -qF '<title>Queries · coordinatord</title>' "$work/body" ||
  fail "GET /queries is not the queries page: $(head -c 300 "$work/body")"
cmp -s "$work/body" "$source_dir/be/www/queries.html" || fail "GET /queries differs from queries.html"
echo "ok: GET /queries -> $got"

declare -A types=([js]="text/javascript; charset=utf-8" [css]="text/css; charset=utf-8"
                  [html]="text/html; charset=utf-8" [svg]="image/svg+xml" [png]="image/png")
assets=0
while IFS= read -r name; do
  got=$(fetch "/www/$name")
  want="200 ${types[${name##*.}]:-?}"
  [ "$got" = "$want" ] || fail "GET /www/$name answered '$got', expected '$want'"
  cmp -s "$work/body" "$source_dir/be/www/$name" || fail "GET /www/$name differs from be/www/$name"
  echo "ok: GET /www/$name -> $got, the bytes of be/www/$name"
  assets=$((assets + 1))
done < <(cd "$source_dir/be/www" && find . -type f | sed 's|^\./||' | sort)
[ "$assets" -ge 3 ] || fail "only $assets files in $source_dir/be/www"
qr_stop_daemon
[ "$qr_rc" -eq 0 ] || fail "coordinatord exited with $qr_rc after SIGTERM"

# 2. cmake --install into a temporary prefix.
"$cmake" --install "$build_dir" --prefix "$work/prefix" --component coordinatord > "$work/install.log" 2>&1 ||
  { cat "$work/install.log"; fail "cmake --install failed"; }
for f in bin/coordinatord bin/coordinatord-passwd lib/systemd/system/coordinatord.service \
         share/doc/query_registry/examples/coordinatord.flags; do
  [ -f "$work/prefix/$f" ] || fail "cmake --install did not install $f"
done
version=$(cd / && "$work/prefix/bin/coordinatord" --version) || fail "installed coordinatord --version failed"
grep -qE '^coordinatord [0-9]+\.[0-9]+\.[0-9]+ \(git ([0-9a-f]{7,}(-dirty)?|unknown)\)$' <<< "$version" ||
  fail "installed coordinatord --version printed '$version'"
echo "ok: installed $(cd "$work/prefix" && find . -type f | sort | tr '\n' ' ')"
echo "ok: installed coordinatord --version -> $version"
"$work/prefix/bin/coordinatord" --flagfile="$work/prefix/share/doc/query_registry/examples/coordinatord.flags" \
  --version > /dev/null || fail "the installed example flag file is not accepted"

# 3. The unit, pointed at the installed binary (its ExecStart names the configured prefix).
if command -v systemd-analyze > /dev/null; then
  mkdir -p "$work/unit"
  sed "s|^ExecStart=[^ ]*/coordinatord |ExecStart=$work/prefix/bin/coordinatord |" \
    "$work/prefix/lib/systemd/system/coordinatord.service" > "$work/unit/coordinatord.service"
  grep -q "^ExecStart=$work/prefix/bin/coordinatord --flagfile=/etc/coordinatord/coordinatord.flags$" \
    "$work/unit/coordinatord.service" || fail "unexpected ExecStart in the installed unit"
  # verify exits 0 on unknown keys and bad values: any word about the unit is a failure.
  out=$(systemd-analyze verify "$work/unit/coordinatord.service" 2>&1)
  rc=$?
  if [ "$rc" -ne 0 ] || grep -qF "coordinatord.service" <<< "$out"; then
    fail "systemd-analyze verify (rc $rc): $out"
  fi
  echo "ok: systemd-analyze verify accepts the installed unit"
else
  echo "systemd-analyze not installed: unit not verified"
fi
echo "all checks passed"
