#!/usr/bin/env bash
# SIGINT and SIGTERM stop after writing what was read (130, 143); SIGSTOP/SIGCONT of ratelimit or
# of its consumer lose nothing.
# Timing: loose bounds, run alone (RESOURCE_LOCK timing).
source "$E2E_LIB"

random_file "$WORK/in" 200000

# stop_with SIGNAL STATUS INPUT ARGS...: ratelimit reading INPUT from a producer that then stays
# open, stopped after a moment; its output must be a prefix of the input.
stop_with() {
  local signal=$1 expected=$2 input=$3 status=0
  shift 3
  mkfifo "$WORK/fifo"
  { cat "$input"; exec sleep 30; } >"$WORK/fifo" &
  local producer=$!
  # A non-interactive shell starts background jobs with SIGINT ignored, and ratelimit keeps ignored
  # signals ignored: give it the default, as a terminal's foreground job has.
  env --default-signal=INT "$RATELIMIT" "$@" <"$WORK/fifo" >"$WORK/out" 2>"$WORK/stderr" &
  local pid=$!
  sleep 0.4
  kill "-$signal" "$pid"
  wait "$pid" || status=$?
  kill "$producer" 2>/dev/null || true
  wait "$producer" 2>/dev/null || true
  rm -f "$WORK/fifo"
  [ "$status" -eq "$expected" ] || fail "$signal with $*: exit $status, expected $expected"
  [ -s "$WORK/out" ] || fail "$signal with $*: nothing written"
  cmp -n "$(stat -c %s "$WORK/out")" "$input" "$WORK/out" || fail "$signal with $*: not a prefix"
}

stop_with INT 130 "$WORK/in" --rate 100k
stop_with TERM 143 "$WORK/in" --rate 100k
# Waiting for input (all of it already sent) when the signal arrives.
stop_with TERM 143 "$WORK/in" --rate 1G
cmp "$WORK/in" "$WORK/out" || fail "SIGTERM while waiting for input: output incomplete"
# Line mode at one line per second: the signal comes during a long wait, and what was read is
# still written at once, in whole lines (a line a read cut is finished).
printf 'first\nsecond\nthird\n' >"$WORK/lines"
stop_with INT 130 "$WORK/lines" -l --rate 1 --chunk 1
[ "$(tail -c 1 "$WORK/out")" = "" ] || fail "line mode SIGINT wrote part of a line: $(cat "$WORK/out")"

# Opening a FIFO that has no writer yet can still be interrupted.
mkfifo "$WORK/no_writer"
"$RATELIMIT" --rate 1k "$WORK/no_writer" >/dev/null &
pid=$!
sleep 0.3
kill -TERM "$pid"
status=0
wait "$pid" || status=$?
[ "$status" -eq 143 ] || fail "SIGTERM while opening a FIFO: exit $status"

# SIGTERM while the output is full and nobody reads it: on the zero-copy path nothing has been
# read that could be lost, so ratelimit ends at once with 143 instead of waiting for the reader.
mkfifo "$WORK/stuck"
sleep 30 <"$WORK/stuck" &
reader=$!
# terminated_at_once PID WHAT: SIGTERM to PID ends it within a second, with 143.
terminated_at_once() {
  local status=0
  kill -TERM "$1"
  sleep 1
  if kill -0 "$1" 2>/dev/null; then
    kill -KILL "$1"
    fail "$2: still running a second after SIGTERM"
  fi
  wait "$1" || status=$?
  [ "$status" -eq 143 ] || fail "$2: exit $status after SIGTERM, expected 143"
}
# More than the output pipe holds once grown toward a chunk (1 MiB at 10 MB/s).
random_file "$WORK/large" 4000000
# shellcheck disable=SC2002 # cat into ratelimit: its input must be a pipe
cat "$WORK/large" | "$RATELIMIT" --rate 10M >"$WORK/stuck" &
pid=$!
sleep 0.5
terminated_at_once "$pid" "full output and no reader"
kill "$reader"

# The same in line mode, where lines already read are held: the first SIGTERM waits to write them
# (nothing read is dropped while the reader may still read), a second one gives them up.
mkfifo "$WORK/stuck_lines"
sleep 30 <"$WORK/stuck_lines" &
reader=$!
seq 1000000 | "$RATELIMIT" -l --rate 10M >"$WORK/stuck_lines" &
pid=$!
sleep 0.5
kill -TERM "$pid"
sleep 0.5
kill -0 "$pid" 2>/dev/null || fail "line mode: the first SIGTERM dropped the lines already read"
terminated_at_once "$pid" "line mode, a second SIGTERM with a full output and no reader"
kill "$reader"

# SIGSTOP/SIGCONT of ratelimit itself.
"$RATELIMIT" --rate 400k "$WORK/in" >"$WORK/out" &
pid=$!
sleep 0.2
kill -STOP "$pid"
sleep 0.5
kill -CONT "$pid"
wait "$pid" || fail "SIGSTOP/SIGCONT: exit $?"
cmp "$WORK/in" "$WORK/out" || fail "SIGSTOP/SIGCONT of ratelimit lost data"

# SIGSTOP/SIGCONT of the consumer: ratelimit blocks on the full pipe and goes on afterwards.
mkfifo "$WORK/to_consumer"
"$RATELIMIT" --rate 20M "$WORK/large" >"$WORK/to_consumer" &
pid=$!
cat "$WORK/to_consumer" >"$WORK/out" &
consumer=$!
sleep 0.02
kill -STOP "$consumer"
sleep 0.5
kill -CONT "$consumer"
wait "$pid" || fail "consumer stopped: exit $?"
wait "$consumer"
cmp "$WORK/large" "$WORK/out" || fail "SIGSTOP/SIGCONT of the consumer lost data"
