#!/usr/bin/env bash
# A state directory planted as a symbolic link, hard links to the user's own files, FIFOs left by
# killed pipes, a state directory moved while a pipe runs, and floods into a control FIFO.
source "$E2E_LIB"
state=$WORK/state
mkdir -m 700 "$state"

# A symbolic link as the directory itself (another user can plant /tmp/ratelimit-UID pointing to a
# directory of the victim) is refused, and nothing is kept or removed through it.
mkdir -m 700 "$WORK/victim"
expect_status 0 "$RATELIMIT" acquire --rate 5 --key kept --state-dir "$WORK/victim"
ln -s "$WORK/victim" "$WORK/planted"
expect_status 77 "$RATELIMIT" acquire --rate 5 --key new --state-dir "$WORK/planted"
grep -q "^ratelimit: state directory '$WORK/planted' is a symbolic link" "$WORK/stderr" ||
  fail "unexpected error: $(cat "$WORK/stderr")"
RATELIMIT_STATE_DIR=$WORK/planted expect_status 77 "$RATELIMIT" exec --rate 5 -- touch "$WORK/ran"
[ ! -e "$WORK/ran" ] || fail "the command ran with a planted state directory"
expect_status 77 "$RATELIMIT" reset --key kept --state-dir "$WORK/planted"
[ -e "$WORK/victim/kept.bucket" ] || fail "reset removed a bucket through a symbolic link"
[ ! -e "$WORK/victim/new.bucket" ] || fail "a bucket was kept through a symbolic link"

# A hard link to another file of the user is refused, not truncated to a record.
echo precious >"$WORK/mine"
ln "$WORK/mine" "$state/api.bucket"
expect_status 77 "$RATELIMIT" acquire --rate 5 --key api --state-dir "$state"
grep -q "has 2 links" "$WORK/stderr" || fail "the error does not say why: $(cat "$WORK/stderr")"
[ "$(cat "$WORK/mine")" = precious ] || fail "a hard-linked file was overwritten"
rm "$state/api.bucket"
# A leftover of an interrupted update that is a hard link is removed, not written through.
ln "$WORK/mine" "$state/api.bucket.new"
expect_status 0 "$RATELIMIT" acquire --rate 5 --key api --state-dir "$state"
[ "$(cat "$WORK/mine")" = precious ] || fail "a hard-linked leftover was overwritten"
[ ! -e "$state/api.bucket.new" ] || fail "the leftover of an update stayed"

export RATELIMIT_STATE_DIR=$state
# The FIFOs of pipes that were killed are removed by the next pipe; a live process's stays.
dead=$(sh -c 'echo $$')
mkfifo -m 600 "$state/pipe-$dead.bytes" "$state/pipe-$dead.records"
sleep 30 &
alive=$!
mkfifo -m 600 "$state/pipe-$alive.bytes"
echo x | "$RATELIMIT" --rate 1G >/dev/null
[ ! -e "$state/pipe-$dead.bytes" ] && [ ! -e "$state/pipe-$dead.records" ] ||
  fail "the FIFOs of a process that is gone stayed"
[ -p "$state/pipe-$alive.bytes" ] || fail "the FIFO of a live process was removed"
kill "$alive"
rm "$state/pipe-$alive.bytes"

# The FIFO is removed from the directory it was made in, even if that was moved meanwhile.
"$RATELIMIT" --rate 1 </dev/zero >/dev/null &
pid=$!
wait_for_file "$state/pipe-$pid.bytes"
mv "$state" "$WORK/moved"
mkdir -m 700 "$state"
kill -TERM "$pid"
wait "$pid" || true
[ ! -e "$WORK/moved/pipe-$pid.bytes" ] || fail "the FIFO stayed in the moved directory"

# A flood without a newline into a pipe's FIFO costs it no memory, and `set` works after it.
"$RATELIMIT" --rate 1 </dev/zero >/dev/null &
pid=$!
wait_for_file "$state/pipe-$pid.bytes"
rss_kb() { awk '/^VmRSS:/ { print $2 }' "/proc/$pid/status"; }
before=$(rss_kb)
head -c 20000000 /dev/zero | tr '\0' x >"$state/pipe-$pid.bytes"
echo >"$state/pipe-$pid.bytes"
sleep 0.3
after=$(rss_kb)
[ $((after - before)) -lt 4000 ] || fail "20 MB without a newline grew the pipe by $((after - before)) kB"
expect_status 0 "$RATELIMIT" set "$pid" --rate 2
kill -TERM "$pid"
wait "$pid" || true
