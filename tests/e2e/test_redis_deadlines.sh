#!/usr/bin/env bash
# One deadline per operation on Redis: --redis-timeout bounds connect, AUTH, SELECT, FCALL,
# FUNCTION LOAD and FCALL again together, not each; and --try / --timeout count the wait for the server's answer, as the
# state-file store counts the wait for its lock (75, not 69 after --redis-timeout, not a grant
# after the server came back).
# Timing: loose bounds, run alone (RESOURCE_LOCK timing).
source "$E2E_LIB"
source "$(dirname "${BASH_SOURCE[0]}")/redis_server.sh"
export RATELIMIT_STATE_DIR=$WORK/state

# expect_within LOW HIGH CODE ARGS...: ratelimit ARGS exits CODE after LOW to HIGH ms.
expect_within() {
  local low=$1 high=$2 code=$3 start ms
  shift 3
  start=$(now_ns)
  expect_status "$code" "$RATELIMIT" "$@"
  ms=$(ms_since "$start")
  [ "$ms" -ge "$low" ] && [ "$ms" -lt "$high" ] ||
    fail "'$*' took ${ms} ms, expected ${low} to ${high} ms"
}

# A server whose every reply comes 200 ms late (a proxy that holds each reply back), with a
# password, a database and no function loaded: AUTH, SELECT, FCALL (no function), FUNCTION LOAD
# and FCALL again are five round trips, 1000 ms in all, each within a --redis-timeout of 300 ms.
start_redis slow --requirepass secret
python3 -c '
import socket, sys, threading, time
listener = socket.socket()
listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
listener.bind(("127.0.0.1", 0))
listener.listen(8)
def pump(source, sink, delay):
    try:
        while True:
            data = source.recv(65536)
            if not data:
                break
            time.sleep(delay)
            sink.sendall(data)
    except OSError:
        pass
    sink.close()
def serve(client):
    server = socket.socket(socket.AF_UNIX)
    server.connect(sys.argv[1])
    threading.Thread(target=pump, args=(client, server, 0), daemon=True).start()
    pump(server, client, 0.2)
with open(sys.argv[2], "w") as port:
    port.write(str(listener.getsockname()[1]))
while True:
    threading.Thread(target=serve, args=(listener.accept()[0],), daemon=True).start()
' "$WORK/slow/sock" "$WORK/proxy.port" &
proxy=$!
REDIS_PIDS+=($proxy)
until [ -s "$WORK/proxy.port" ]; do sleep 0.01; done
slow_url=redis://:secret@127.0.0.1:$(cat "$WORK/proxy.port")/1
shown_url=redis://:***@127.0.0.1:$(cat "$WORK/proxy.port")/1
redis_cli slow -a secret --no-auth-warning function flush >/dev/null
expect_within 250 700 69 acquire --redis "$slow_url" --redis-timeout 300ms --rate 10/s --key k
expect_stderr "ratelimit: Redis at $shown_url: no reply within 300ms"
# With time for all five it is granted.
expect_within 600 3000 0 acquire --redis "$slow_url" --redis-timeout 3s --rate 10/s --key k
kill "$proxy"

# A server that does not answer for 2 s (CLIENT PAUSE) and a --redis-timeout of 3 s.
start_redis paused
export RATELIMIT_REDIS=unix://$WORK/paused/sock
expect_status 0 "$RATELIMIT" acquire --rate 1/h --key p
pause() { [ "$(redis_cli paused client pause 2000 all)" = OK ] || fail "CLIENT PAUSE failed"; }

# --try: refused (75) once its grace for the round trip is over, not granted 2 s later.
pause
expect_within 0 500 75 acquire --try --redis-timeout 3s --rate 10/s --key t
# --timeout: refused when it ends, the command not run.
pause
expect_within 50 600 75 exec --timeout 100ms --redis-timeout 3s --rate 10/s --key t -- touch "$WORK/ran"
[ ! -e "$WORK/ran" ] || fail "exec --timeout ran the command after its timeout"
pause
expect_within 250 1000 75 acquire --timeout 300ms --redis-timeout 3s --rate 10/s --key t
# A --redis-timeout shorter than --timeout: the server is unavailable (69).
pause
expect_within 250 1000 69 acquire --timeout 5s --redis-timeout 300ms --rate 10/s --key t
expect_stderr "ratelimit: Redis at unix://$WORK/paused/sock: no reply within 300ms"

# A server that answers: --try still asks it, and its answer decides.
redis_cli paused client unpause >/dev/null
expect_within 0 1000 0 acquire --try --rate 1/h --key fresh
expect_within 0 1000 75 acquire --try --rate 1/h --key fresh
expect_status 0 "$RATELIMIT" acquire --try --redis "redis://127.0.0.1:$(cat "$WORK/paused/port")" \
  --rate 1/h --key fresh-tcp
