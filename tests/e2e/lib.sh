# Sourced by every end-to-end test. $RATELIMIT is the binary under test.
set -euo pipefail

: "${RATELIMIT:?RATELIMIT must name the binary under test}"
WORK=$(mktemp -d)
# Redis straight from each process, unless the test uses Redis: an agent would outlive a test
# that does not end it. redis_server.sh turns the agent on again (use_agents), as users have it.
export RATELIMIT_NO_AGENT=1
trap 'rm -rf "$WORK"' EXIT

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

# skip REASON: the test cannot run here (ctest reports it skipped: SKIP_RETURN_CODE, never a pass).
skip() {
  echo "SKIP: $*" >&2
  exit 200
}

# skip_part REASON: a part of the test cannot run here (it needs root, say); the rest runs, and
# end_test then reports the test skipped, so that it never passes without that part.
parts_skipped=()
skip_part() {
  parts_skipped+=("$*")
}
# end_test: the last line of a test that calls skip_part.
end_test() {
  local part
  for part in "${parts_skipped[@]}"; do echo "SKIP: $part" >&2; done
  [ "${#parts_skipped[@]}" -eq 0 ] || skip "the parts above did not run; every other check passed"
}

# granted_of COUNT CMD...: runs CMD COUNT times and prints how many were granted (exit 0); a
# refusal is 75, and any other exit fails the test. CMD's stderr is added to $WORK/granted_of.stderr.
granted_of() {
  local count=$1 granted=0 i status
  shift
  for i in $(seq "$count"); do
    status=0
    "$@" 2>>"$WORK/granted_of.stderr" || status=$?
    case $status in
      0) granted=$((granted + 1)) ;;
      75) ;;
      *) cat "$WORK/granted_of.stderr" >&2; fail "'$*' exited $status" ;;
    esac
  done
  echo "$granted"
}

# expect_status CODE CMD...: runs CMD, fails unless it exits with CODE. Its stderr is kept in
# $WORK/stderr for expect_stderr.
expect_status() {
  local expected=$1 status=0
  shift
  "$@" 2>"$WORK/stderr" || status=$?
  [ "$status" -eq "$expected" ] || {
    cat "$WORK/stderr" >&2
    fail "'$*' exited $status, expected $expected"
  }
}

# expect_stderr TEXT: the last expect_status's stderr is exactly TEXT.
expect_stderr() {
  local actual
  actual=$(cat "$WORK/stderr")
  [ "$actual" = "$1" ] || fail "stderr was '$actual', expected '$1'"
}

# expect_error STDERR CMD...: CMD exits 64 (usage) with exactly STDERR, before reading anything.
expect_error() {
  local expected=$1
  shift
  expect_status 64 "$@" </dev/null
  expect_stderr "$expected"
}

# tmux on a server of the test's own: tests that run at once never share the default server,
# which ends with its last session, under another test's new one.
tmux() { command tmux -S "$WORK/tmux.socket" "$@"; }

# random_file PATH BYTES: incompressible test data.
random_file() {
  head -c "$2" /dev/urandom >"$1"
}

# now_ns: the monotonic-enough wall clock, for the few loose timing checks.
now_ns() {
  date +%s%N
}

# ms_since START_NS: milliseconds since START_NS, a value of now_ns.
ms_since() {
  echo $((($(now_ns) - $1) / 1000000))
}

# wait_for_file PATH: waits up to 10 s for PATH to exist (a background command says it started).
# expect_ended_by_signal SIGNAL WHAT BOUND_MS COMMAND...: COMMAND, sent SIGNAL 0.3 s after it
# starts (while it waits), ends with 128 + the signal's number within BOUND_MS of the signal.
expect_ended_by_signal() {
  local signal=$1 what=$2 bound=$3 pid status=0 start ms expected
  shift 3
  expected=$((128 + $(kill -l "$signal")))
  env --default-signal=INT "$@" &
  pid=$!
  sleep 0.3
  start=$(now_ns)
  kill "-$signal" $pid
  wait $pid || status=$?
  ms=$(ms_since "$start")
  [ "$status" -eq "$expected" ] || fail "SIG$signal $what: exit $status, expected $expected"
  [ "$ms" -lt "$bound" ] || fail "SIG$signal $what: it ended after ${ms} ms"
}

# interrupted_after_1s WHAT COMMAND...: COMMAND, its output in $WORK/out and its errors in
# $WORK/stderr, sent SIGINT after 1 s, ends by it (130); WHAT names it if it does not.
interrupted_after_1s() {
  local what=$1 pid status=0
  shift
  env --default-signal=INT "$@" >"$WORK/out" 2>"$WORK/stderr" &
  pid=$!
  sleep 1
  kill -INT "$pid"
  wait "$pid" || status=$?
  [ "$status" -eq 130 ] || fail "$what exited $status: $(cat -v "$WORK/stderr")"
}

# running PID: the process exists and has not ended. A daemon that ended is reparented to a PID 1
# that may reap it late, and a zombie still answers kill -0.
running() {
  local state
  state=$(awk '{ print $3 }' "/proc/$1/stat" 2>/dev/null) || return 1
  [ -n "$state" ] && [ "$state" != Z ] && [ "$state" != X ]
}

wait_for_file() {
  local tries=0
  until [ -e "$1" ]; do
    [ $((tries += 1)) -le 1000 ] || fail "$1 did not appear within 10 s"
    sleep 0.01
  done
}

# expect_paced_starts COUNT FILE...: the start times (now_ns) listed in FILE... are COUNT, and no
# 500 ms window holds more than 15 of them: at 20/s it holds 11, plus 4 for scheduling delays;
# unpaced, 20 processes would all start within about 250 ms.
expect_paced_starts() {
  local count=$1
  shift
  sort -n "$@" >"$WORK/starts"
  [ "$(wc -l <"$WORK/starts")" -eq "$count" ] || fail "expected $count starts"
  awk '{ t[NR] = $1 } END {
    for (i = 1; i <= NR; i++) { n = 0; for (j = i; j <= NR && t[j] - t[i] < 500000000; j++) n++
      if (n > 15) { print "window at start " i " holds " n " starts"; exit 1 } } }' "$WORK/starts" ||
    fail "starts were not spread out"
}

# boundary_in SECONDS: exports a TZ in which a whole minute starts SECONDS from now, and sets
# $boundary (that moment, Unix seconds), $before (HH:MM of the minute before it) and $at (its
# HH:MM). Timetable entries are whole minutes; a POSIX zone whose offset has seconds
# ("RLT-0:00:SS") puts one a few seconds ahead, so a test of a change takes seconds, not a minute.
boundary_in() {
  boundary=$(($(date +%s) + $1))
  export TZ="RLT-0:00:$(printf %02d $(((60 - boundary % 60) % 60)))"
  before=$(date -d "@$((boundary - 60))" +%H:%M)
  at=$(date -d "@$boundary" +%H:%M)
  [ "$(date -d "@$boundary" +%S)" = 00 ] || fail "the zone $TZ does not put $at on a whole minute"
}

# expect_change_at_boundary STATS_FILE: the change to no limit that --stats=json lists came 0 to
# 100 ms after $boundary.
expect_change_at_boundary() {
  local changed late_ms
  changed=$(grep -o '{"unix_time":[0-9.]*,"rate":null,"rate_text":"off"}' "$1" | head -n 1 | tr -dc '0-9.')
  [ -n "$changed" ] || fail "no change to no limit in $(cat "$1")"
  late_ms=$(awk -v changed="$changed" -v boundary="$boundary" \
    'BEGIN { printf "%d", (changed - boundary) * 1000 }')
  [ "$late_ms" -ge 0 ] && [ "$late_ms" -le 100 ] ||
    fail "the rate changed ${late_ms} ms after the boundary $at ($TZ), expected 0..100 ms"
}
