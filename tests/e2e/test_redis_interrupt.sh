#!/usr/bin/env bash
# A stop signal while a Redis round trip waits for a server that does not answer (CLIENT PAUSE),
# or while the connection to a host that does not complete it waits:
# acquire, exec and a pipe with --key end at once with 128+signal, not after --redis-timeout, the
# command not run and nothing written beyond what was granted. Without a signal the timeout
# still ends them with 69.
# Timing: loose bounds, run alone (RESOURCE_LOCK timing).
source "$E2E_LIB"
source "$(dirname "${BASH_SOURCE[0]}")/redis_server.sh"
export RATELIMIT_STATE_DIR=$WORK/state

# run_in_background INPUT ARGS...: ratelimit ARGS reading INPUT, writing $WORK/out; its pid in
# $pid. A non-interactive shell starts background jobs with SIGINT ignored (and their standard
# input on /dev/null), and ratelimit keeps ignored signals ignored: give it the default, as a
# terminal's foreground job has.
run_in_background() {
  local input=$1
  shift
  env --default-signal=INT "$RATELIMIT" "$@" <"$input" >"$WORK/out" 2>"$WORK/stderr" &
  pid=$!
}

# wait_for_redis_connection: until process $pid holds a socket (it connected to Redis; nothing
# else it does opens one), and a moment more for it to send its command and wait for the reply.
wait_for_redis_connection() {
  local tries=0
  until find "/proc/$pid/fd" -lname 'socket:*' 2>/dev/null | grep -q .; do
    kill -0 "$pid" 2>/dev/null || fail "ratelimit $pid ended before it connected to Redis"
    [ $((tries += 1)) -le 500 ] || fail "ratelimit $pid did not connect to Redis within 5 s"
    sleep 0.01
  done
  sleep 0.2
}

# stopped_at_once SIGNAL STATUS: SIGNAL to process $pid ends it within a second, with STATUS.
# A second is far longer than ratelimit needs (about 10 ms) and far shorter than the 30 s
# --redis-timeout that an uninterruptible round trip would wait for.
stopped_at_once() {
  local start status=0 ms
  start=$(now_ns)
  kill "-$1" "$pid"
  wait "$pid" || status=$?
  ms=$(ms_since "$start")
  [ "$status" -eq "$2" ] || {
    cat "$WORK/stderr" >&2
    fail "SIG$1 while Redis did not answer: exit $status, expected $2"
  }
  [ "$ms" -lt 1000 ] || fail "SIG$1 while Redis did not answer: ended after ${ms} ms"
}

random_file "$WORK/in" 1000000
# feed_fifo: $WORK/fifo gets the input, then stays open (no end of input), until stop_feeding.
feed_fifo() {
  rm -f "$WORK/fifo"
  mkfifo "$WORK/fifo"
  { cat "$WORK/in"; exec sleep 60; } >"$WORK/fifo" &
  producer=$!
}
stop_feeding() {
  kill "$producer" 2>/dev/null || true
  wait "$producer" 2>/dev/null || true
}

start_redis paused
export RATELIMIT_REDIS=unix://$WORK/paused/sock
expect_status 0 "$RATELIMIT" acquire --rate 10/s --key p
[ "$(redis_cli paused client pause 20000 all)" = OK ] || fail "CLIENT PAUSE failed"

run_in_background /dev/null acquire --redis-timeout 30s --rate 10/s --key p
wait_for_redis_connection
stopped_at_once INT 130

run_in_background /dev/null exec --redis-timeout 30s --rate 10/s --key p -- touch "$WORK/ran"
wait_for_redis_connection
stopped_at_once TERM 143
[ ! -e "$WORK/ran" ] || fail "the command ran after SIGTERM"

run_in_background /dev/null exec --redis-timeout 30s --rate 10/s --key p -- touch "$WORK/ran"
wait_for_redis_connection
stopped_at_once HUP 129
[ ! -e "$WORK/ran" ] || fail "the command ran after SIGHUP"

# A pipe whose first chunk waits for the server: nothing was granted, nothing is written.
feed_fifo
run_in_background "$WORK/fifo" --key p --rate 100k --redis-timeout 30s
wait_for_redis_connection
stopped_at_once INT 130
stop_feeding
[ ! -s "$WORK/out" ] || fail "a pipe stopped before any grant wrote $(stat -c %s "$WORK/out") bytes"

# Without a signal, --redis-timeout still ends the wait: 69, nothing run or written.
start=$(now_ns)
expect_status 69 "$RATELIMIT" acquire --redis-timeout 300ms --rate 10/s --key p
ms=$(ms_since "$start")
expect_stderr "ratelimit: Redis at unix://$WORK/paused/sock: no reply within 300ms"
[ "$ms" -ge 250 ] && [ "$ms" -lt 2000 ] || fail "acquire gave up a paused server after ${ms} ms"
feed_fifo
start=$(now_ns)
expect_status 69 "$RATELIMIT" --key p --rate 100k --redis-timeout 300ms <"$WORK/fifo" >"$WORK/out"
ms=$(ms_since "$start")
stop_feeding
expect_stderr "ratelimit: Redis at unix://$WORK/paused/sock: no reply within 300ms"
[ "$ms" -ge 250 ] && [ "$ms" -lt 2000 ] || fail "a pipe gave up a paused server after ${ms} ms"
[ ! -s "$WORK/out" ] || fail "a pipe that got no grant wrote $(stat -c %s "$WORK/out") bytes"

# A pipe under way when the server pauses: it writes what was granted, then waits for the next
# grant; SIGTERM ends it there without writing more. The output is a prefix of the input.
start_redis later
export RATELIMIT_REDIS=unix://$WORK/later/sock
feed_fifo
run_in_background "$WORK/fifo" --key m --rate 100k --redis-timeout 30s
sleep 0.5
[ "$(redis_cli later client pause 20000 all)" = OK ] || fail "CLIENT PAUSE failed"
# Stalled: the output no longer grows.
sleep 0.5
granted=$(stat -c %s "$WORK/out")
sleep 0.3
[ "$(stat -c %s "$WORK/out")" -eq "$granted" ] || fail "the pipe still wrote with Redis paused"
[ "$granted" -gt 0 ] && [ "$granted" -lt 1000000 ] || fail "the pipe wrote $granted bytes before"
stopped_at_once TERM 143
stop_feeding
[ "$(stat -c %s "$WORK/out")" -eq "$granted" ] ||
  fail "after SIGTERM the pipe wrote $(($(stat -c %s "$WORK/out") - granted)) bytes more"
cmp -n "$granted" "$WORK/in" "$WORK/out" || fail "the pipe's output is not a prefix of its input"

# A server whose host does not complete the connection (a listener that never accepts, its queue
# full, as a host that drops the handshake): the connect is waited for in the same signal-aware
# way, and --redis-timeout still bounds it.
python3 -c '
import socket, sys, time
listener = socket.socket()
listener.bind(("127.0.0.1", 0))
listener.listen(0)
queued = []
for _ in range(3):
    waiting = socket.socket()
    waiting.setblocking(False)
    try:
        waiting.connect(listener.getsockname())
    except BlockingIOError:
        pass
    queued.append(waiting)
with open(sys.argv[1], "w") as port:
    port.write(str(listener.getsockname()[1]))
time.sleep(60)
' "$WORK/port.new" &
listener=$!
until [ -s "$WORK/port.new" ]; do sleep 0.01; done
export RATELIMIT_REDIS=redis://127.0.0.1:$(cat "$WORK/port.new")
run_in_background /dev/null acquire --redis-timeout 30s --rate 10/s --key c
wait_for_redis_connection
stopped_at_once TERM 143
start=$(now_ns)
expect_status 69 "$RATELIMIT" acquire --redis-timeout 300ms --rate 10/s --key c
ms=$(ms_since "$start")
expect_stderr "ratelimit: Redis at $RATELIMIT_REDIS: no connection within 300ms"
[ "$ms" -ge 250 ] && [ "$ms" -lt 2000 ] || fail "acquire gave up a silent host after ${ms} ms"
kill "$listener"
