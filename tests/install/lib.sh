# Shared by the install tests (sourced): messages, the README's snippets, the loopback index.
step() { printf '\n== %s\n' "$*"; }
die() { printf 'FAIL: %s\n' "$*" >&2; exit 1; }
# one GLOB: the single file the glob names (dist/ must hold one of each artifact).
one() { [ $# -eq 1 ] && [ -f "$1" ] || die "want one file, found: $*  (make dist)"; echo "$1"; }
snippet() { python3 "$here/snippet.py" "$1" "$2"; }

# start_index ROOT FILE...: serve FILEs on loopback (index.py); INDEX is its base URL.
INDEX_PID=
start_index() {
  _ir=$1; shift
  rm -f "$_ir.port"
  python3 "$here/index.py" "$_ir" "$_ir.port" "$@" &
  INDEX_PID=$!
  i=0
  while [ ! -f "$_ir.port" ]; do
    i=$((i + 1)); [ $i -gt 100 ] && die "the index did not start"
    kill -0 $INDEX_PID 2>/dev/null || die "the index exited"
    sleep 0.1
  done
  INDEX=http://127.0.0.1:$(cat "$_ir.port")
  echo "index: $INDEX (simple/, npm/)"
}
stop_index() { [ -n "$INDEX_PID" ] && kill "$INDEX_PID" 2>/dev/null; wait 2>/dev/null; INDEX_PID=; }

# expect DIR OUT PATTERN CMD...: run CMD in DIR, its output into OUT and shown; fail unless it
# succeeds and a line of its output matches PATTERN (grep's).
expect() {
  _d=$1 _o=$2 _p=$3; shift 3
  (cd "$_d" && "$@") >"$_o" 2>&1 || { cat "$_o"; die "failed: $*"; }
  cat "$_o"
  grep -q -- "$_p" "$_o" || die "no line matching '$_p' from: $*"
}
