#!/usr/bin/env bash
# A shared bucket's store that fails while a pipe runs (Redis paused, the bucket file replaced, the
# state directory full) loses nothing: what was read goes out, or stays in the input for its next
# reader; the output and what the next reader gets are the input, byte for byte. A final give-back
# that fails after all data went out is a warning, exit 0. A stop signal writes nothing whose
# permits are not due.
# Timing: loose bounds, run alone (RESOURCE_LOCK timing).
source "$E2E_LIB"
source "$(dirname "${BASH_SOURCE[0]}")/redis_server.sh"
export RATELIMIT_STATE_DIR=$WORK/state
seq 20000 >"$WORK/lines"
head -c 400000 /dev/urandom >"$WORK/bytes"

# through_fifo IN OUT BREAK CMD...: CMD reads the FIFO that IN is written into, its output in OUT;
# BREAK runs once CMD has written something, given CMD's process id. Then the FIFO's next reader
# takes what CMD left in it: OUT followed by that must be IN. CMD's exit status is left in
# $status, its stderr in $WORK/stderr.
through_fifo() {
  local in=$1 out=$2 break_store=$3 pid tries=0
  shift 3
  rm -f "$WORK/fifo" "$WORK/rest" "$WORK/opened"
  mkfifo "$WORK/fifo"
  # Held open for reading and writing until the next reader has it: the writer is never left
  # without a reader, and no reader sees the end before the next reader opens.
  exec 3<>"$WORK/fifo"
  cat "$in" 3<&- >"$WORK/fifo" &
  local writer=$!
  "$@" <"$WORK/fifo" 3<&- 2>"$WORK/stderr" >"$out" &
  pid=$!
  until [ -s "$out" ]; do
    [ $((tries += 1)) -le 1000 ] || fail "'$*' wrote nothing within 10 s"
    sleep 0.01
  done
  "$break_store" "$pid"
  status=0
  wait "$pid" || status=$?
  (
    exec 3<&-
    exec 4<"$WORK/fifo"
    : >"$WORK/opened"
    cat <&4 >"$WORK/rest"
  ) &
  local reader=$!
  wait_for_file "$WORK/opened"
  exec 3<&-
  wait "$writer"
  wait "$reader"
  cat "$out" "$WORK/rest" | cmp -s - "$in" ||
    fail "'$*' (exit $status): output $(wc -c <"$out") bytes + next reader $(wc -c <"$WORK/rest") bytes are not the input"
}

expect_exit() {
  [ "$status" -eq "$1" ] || {
    cat "$WORK/stderr" >&2
    fail "exit $status, expected $1"
  }
}

# Redis paused past --redis-timeout: 69, in line mode and in byte mode on the buffered path
# (an output opened for appending cannot be spliced into).
start_redis main
pause_redis() { redis_cli main client pause 3000 all >/dev/null; }
redis=(--redis "unix://$WORK/main/sock" --redis-timeout 200ms)
through_fifo "$WORK/lines" "$WORK/out" pause_redis "$RATELIMIT" -l --rate 5000 --key lines "${redis[@]}"
expect_exit 69
grep -q "no reply within 200ms" "$WORK/stderr" || fail "no word of the paused server: $(cat "$WORK/stderr")"
redis_cli main client unpause >/dev/null
rm -f "$WORK/appended"
through_fifo "$WORK/bytes" "$WORK/appended" pause_redis \
  sh -c 'exec "$@" >>"$0"' "$WORK/appended" "$RATELIMIT" --rate 100k --key bytes "${redis[@]}"
expect_exit 69
stop_redis main

# The bucket file replaced by a symbolic link mid-run: 77. A replacement that lands between the
# pipe's check of its locked file and its rename of the next record is renamed over (the link is
# replaced, not followed), so the link is put back while the pipe runs, up to 5 s.
replace_bucket() {
  local pid=$1 tries=0
  : >"$WORK/elsewhere"
  while kill -0 "$pid" 2>/dev/null && [ $((tries += 1)) -le 500 ]; do
    if [ ! -L "$WORK/state/lines.bucket" ]; then
      ln -sfn "$WORK/elsewhere" "$WORK/state/lines.new-link"
      mv -T "$WORK/state/lines.new-link" "$WORK/state/lines.bucket"
    fi
    sleep 0.01
  done
}
through_fifo "$WORK/lines" "$WORK/out" replace_bucket "$RATELIMIT" -l --rate 5000 --key lines
expect_exit 77
rm -rf "$WORK/state"

# A regular file on standard input: what was read and not written goes back to it, so the next
# command reading the same standard input starts right after the last line written.
rm -f "$WORK/out"
{
  "$RATELIMIT" -l --rate 5000 --key lines <&0 2>"$WORK/stderr" >"$WORK/out" &
  pid=$!
  until [ -s "$WORK/out" ]; do sleep 0.01; done
  replace_bucket "$pid"
  status=0
  wait "$pid" || status=$?
  cat >"$WORK/rest"
} <"$WORK/lines"
expect_exit 77
cat "$WORK/out" "$WORK/rest" | cmp -s - "$WORK/lines" || fail "standard input: output + rest are not the input"
[ -s "$WORK/rest" ] || fail "the run read everything before the bucket file was replaced"
rm -rf "$WORK/state"

# A stop signal writes only what is due: at 1 line/s, paying first, with no burst, a chunk of
# 1000 lines is due after 1000 s, so nothing goes out in the first second; what was read goes back
# to standard input. (A non-interactive shell starts background jobs with SIGINT ignored, which
# ratelimit keeps: env gives it the default, as a terminal's foreground job has.)
{
  env --default-signal=INT "$RATELIMIT" -l --rate 1 --burst 0 --pay-first --chunk 1000 <&0 >"$WORK/out" &
  pid=$!
  sleep 1
  kill -INT "$pid"
  status=0
  wait "$pid" || status=$?
  cat >"$WORK/rest"
} <"$WORK/lines"
expect_exit 130
[ ! -s "$WORK/out" ] || fail "a stop released $(wc -l <"$WORK/out") lines not yet due"
cmp -s "$WORK/rest" "$WORK/lines" || fail "the lines read were not given back at the stop"
status=0
env --default-signal=INT "$RATELIMIT" -l --rate 1 --burst 0 --pay-first --chunk 1000 "$WORK/lines" -o "$WORK/out" &
pid=$!
sleep 1
kill -INT "$pid"
wait "$pid" || status=$?
expect_exit 130
[ ! -s "$WORK/out" ] || fail "a stop released $(wc -l <"$WORK/out") lines of a file not yet due"

# A state directory that fills: 69 mid-run, nothing lost; filled after the last write, the final
# give-back only warns. A tiny tmpfs needs mount, which CI (root) has.
mkdir -p "$WORK/small"
if ! mount -t tmpfs -o size=256k tmpfs "$WORK/small" 2>/dev/null; then
  skip "the full state directory: mount -t tmpfs refused (needs root); the checks above passed"
fi
trap 'umount "$WORK/small" 2>/dev/null || true; rm -rf "$WORK"' EXIT
export RATELIMIT_STATE_DIR=$WORK/small/state
fill_state_dir() { dd if=/dev/zero of="$WORK/small/filler" bs=4k 2>/dev/null || true; }
through_fifo "$WORK/lines" "$WORK/out" fill_state_dir "$RATELIMIT" -l --rate 5000 --key lines
expect_exit 69
grep -q "No space left on device" "$WORK/stderr" || fail "no word of the full directory: $(cat "$WORK/stderr")"
rm -f "$WORK/small/filler"

# All data out, then the directory fills and the FIFO's writer closes: the give-back fails.
rm -f "$WORK/fifo"
mkfifo "$WORK/fifo"
"$RATELIMIT" -l --rate 1000 --key last <"$WORK/fifo" >"$WORK/out" 2>"$WORK/stderr" &
pid=$!
exec 3>"$WORK/fifo"
seq 50 >&3
tries=0
until [ "$(wc -l <"$WORK/out")" -eq 50 ]; do
  [ $((tries += 1)) -le 1000 ] || fail "50 lines did not go out within 10 s"
  sleep 0.01
done
fill_state_dir
exec 3>&-
status=0
wait "$pid" || status=$?
expect_exit 0
[ "$(grep -c . "$WORK/stderr")" -eq 1 ] && grep -q "^ratelimit: warning: key 'last': .*No space left on device" "$WORK/stderr" ||
  fail "a failed give-back said: $(cat "$WORK/stderr")"
seq 50 | cmp -s - "$WORK/out" || fail "the output is not the input"
echo ok
