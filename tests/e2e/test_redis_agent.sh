#!/usr/bin/env bash
# The host agent: exec and acquire through one agent per user and state directory, which keeps
# one Redis connection for all of them; the bound holds through it and through its SIGKILL; its
# socket is this user's alone; it ends when idle; --no-agent and $RATELIMIT_NO_AGENT turn it off.
# Timing: loose bounds, run alone (RESOURCE_LOCK timing).
# Under ThreadSanitizer too (label threaded), for the agent's threads: tests/e2e/under_tsan.sh.
source "$E2E_LIB"
source "$(dirname "${BASH_SOURCE[0]}")/redis_server.sh"
start_redis main
url=unix://$WORK/main/sock
export RATELIMIT_REDIS=$url

agent_pid() { cat "$1/agent.lock" 2>/dev/null; }

# The first call starts the agent: a daemon of its own session, its socket 0600.
expect_status 0 "$RATELIMIT" acquire --rate 100/s --key first
wait_for_file "$WORK/state/agent.sock"
pid=$(agent_pid "$WORK/state")
running "$pid" || fail "no agent runs"
[ "$(stat -c %a "$WORK/state/agent.sock")" = 600 ] || fail "socket mode $(stat -c %a "$WORK/state/agent.sock")"
[ "$(ps -o sid= -p "$pid")" != "$(ps -o sid= -p $$)" ] || fail "the agent is in the caller's session"
[ "$(readlink "/proc/$pid/fd/0")" = /dev/null ] || fail "the agent's stdin is $(readlink "/proc/$pid/fd/0")"

# 8 loops x 200 acquire --try on one key at 200/s (burst 1 s): every call answered (0 or 75),
# grants within rate x time + burst, and the server saw a handful of connections, not 1600.
before=$(connections main)
start=$(now_ns)
loops=()
for loop in 1 2 3 4 5 6 7 8; do
  for _ in $(seq 200); do
    status=0
    "$RATELIMIT" acquire --rate 200/s --key loop --try 2>>"$WORK/loop.err" || status=$?
    echo "$status"
  done >"$WORK/loop.$loop" &
  loops+=($!)
done
wait "${loops[@]}"
ms=$(ms_since "$start")
after=$(connections main)
[ -s "$WORK/loop.err" ] && fail "stderr of the loops: $(head -3 "$WORK/loop.err")"
grants=$(cat "$WORK"/loop.* | grep -c '^0$' || true)
others=$(cat "$WORK"/loop.* | grep -vc -e '^0$' -e '^75$' || true)
[ "$others" -eq 0 ] || fail "$others calls neither granted nor refused"
bound=$((200 * ms / 1000 + 200 + 1))
[ "$grants" -le "$bound" ] || fail "$grants grants in ${ms} ms at 200/s, at most $bound"
[ "$grants" -ge 100 ] || fail "only $grants grants in ${ms} ms at 200/s"
[ $((after - before)) -le 5 ] || fail "$((after - before)) connections for 1600 calls through the agent"
[ "$(agent_pid "$WORK/state")" = "$pid" ] || fail "a second agent took over"

# status shows the agent, and so does its JSON.
"$RATELIMIT" status >"$WORK/status"
grep -qE "^agent: pid $pid, 1 Redis connection, [0-9]+ decisions served$" "$WORK/status" ||
  fail "status: $(cat "$WORK/status")"
decisions=$(sed -n 's/^agent: .*, \([0-9]*\) decisions served$/\1/p' "$WORK/status")
"$RATELIMIT" status --json >"$WORK/status.json"
python3 -c '
import json, sys
agent = json.load(open(sys.argv[1]))["agent"]
assert agent["pid"] == int(sys.argv[2]) and agent["connections"] == 1, agent
# Every grant was a decision; a --try whose deadline passed while it queued (a loaded machine) is
# refused without one, so the 1,600 calls may have made fewer.
assert agent["decisions"] >= int(sys.argv[3]) >= int(sys.argv[4]), agent
' "$WORK/status.json" "$pid" "$decisions" "$grants" || fail "status --json: $(cat "$WORK/status.json")"

# A wait through the agent ends at once on Ctrl-C; --timeout and --try refuse in time.
expect_status 0 "$RATELIMIT" acquire --rate 1/m --key slow
expect_ended_by_signal INT "acquire through the agent" 1000 \
  "$RATELIMIT" acquire --rate 1/m --key slow
start=$(now_ns)
expect_status 75 "$RATELIMIT" acquire --rate 1/m --key slow --timeout 300ms
ms=$(ms_since "$start")
[ "$ms" -lt 1500 ] || fail "--timeout 300ms through the agent took ${ms} ms"

# A server that hangs: --redis-timeout holds through the agent (69), and so does the policy.
kill -STOP "$(cat "$WORK/main/pid")"
start=$(now_ns)
expect_status 69 "$RATELIMIT" acquire --rate 10/s --key hung --redis-timeout 300ms
ms=$(ms_since "$start")
[ "$ms" -lt 2000 ] || fail "--redis-timeout 300ms through the agent took ${ms} ms"
expect_status 0 "$RATELIMIT" acquire --rate 10/s --key hung --redis-timeout 300ms --on-redis-error allow
# Meanwhile the agent answers for another server at once: a caller of the hung one waits for its
# own --redis-timeout (3 s), never the others' (each call here well under it, through the agent:
# no connection of its own).
start_redis other
other=unix://$WORK/other/sock
expect_status 0 "$RATELIMIT" acquire --redis "$other" --rate 100/s --key other
other_connections=$(connections other)
start=$(now_ns)
(
  status=0
  "$RATELIMIT" acquire --rate 10/s --key hung --redis-timeout 3s 2>"$WORK/hung.err" || status=$?
  echo "$status $(ms_since "$start")" >"$WORK/hung.result"
) &
hung=$!
sleep 0.3 # the hung call's request is in the agent
for call in 1 2 3 4 5; do
  call_start=$(now_ns)
  expect_status 0 "$RATELIMIT" acquire --redis "$other" --rate 100/s --key other
  ms=$(ms_since "$call_start")
  [ "$ms" -lt 1000 ] || fail "call $call on another server waited ${ms} ms for the hung one"
done
wait $hung
read -r status ms <"$WORK/hung.result"
[ "$status" -eq 69 ] || fail "the hung server's caller exited $status: $(cat "$WORK/hung.err")"
[ "$ms" -ge 2500 ] && [ "$ms" -lt 6000 ] || fail "the hung server's caller ended after ${ms} ms"
[ $(($(connections other) - other_connections)) -le 1 ] ||
  fail "the calls on the other server connected themselves"
kill -CONT "$(cat "$WORK/main/pid")"
expect_status 0 "$RATELIMIT" acquire --rate 10/s --key after-hang

# The agent SIGKILLed mid-run: no call hangs past its deadline (each has 2 s), every call is
# answered, grants stay within the bound, and a new agent takes over.
start=$(now_ns)
loops=()
for loop in 1 2 3 4 5 6 7 8; do
  for _ in $(seq 60); do
    status=0
    timeout 5 "$RATELIMIT" acquire --rate 100/s --key killed --timeout 2s 2>>"$WORK/kill.err" ||
      status=$?
    echo "$status"
  done >"$WORK/kill.$loop" &
  loops+=($!)
done
sleep 0.5
kill -9 "$pid"
wait "${loops[@]}"
ms=$(ms_since "$start")
grants=$(cat "$WORK"/kill.* | grep -c '^0$' || true)
others=$(cat "$WORK"/kill.* | grep -vc -e '^0$' -e '^75$' || true)
[ "$others" -eq 0 ] || fail "$others calls neither granted nor refused: $(sort "$WORK"/kill.* | uniq -c | tr '\n' ' ') $(head -3 "$WORK/kill.err")"
bound=$((100 * ms / 1000 + 100 + 1))
[ "$grants" -le "$bound" ] || fail "$grants grants in ${ms} ms at 100/s after a SIGKILL, at most $bound"
new_pid=$(agent_pid "$WORK/state")
[ -n "$new_pid" ] && [ "$new_pid" != "$pid" ] && running "$new_pid" || fail "no new agent after the SIGKILL"
pid=$new_pid

# Another user can neither connect to the socket nor be answered by the agent.
if [ "$(id -u)" -eq 0 ] && command -v setpriv >/dev/null && [ -x /usr/bin/python3 ]; then
  chmod 755 "$WORK"
  chmod 711 "$WORK/state"
  as_nobody() { setpriv --reuid=nobody --regid=nogroup --clear-groups /usr/bin/python3 -c '
import socket, struct, sys
s = socket.socket(socket.AF_UNIX)
try:
    s.connect(sys.argv[1])
except OSError as e:
    print("refused"); sys.exit(0)
s.settimeout(2)
try:
    s.sendall(struct.pack("=I", 12) + b"agent-status")
    print("answered" if s.recv(100) else "closed")
except OSError:
    print("closed")' "$WORK/state/agent.sock"; }
  [ "$(as_nobody)" = refused ] || fail "another user connected to the agent's socket"
  chmod 666 "$WORK/state/agent.sock"
  [ "$(as_nobody)" = closed ] || fail "the agent answered another user"
  chmod 600 "$WORK/state/agent.sock"
  chmod 700 "$WORK/state" "$WORK"
  # A socket of another user's is not used: the call connects itself.
  chown nobody "$WORK/state/agent.sock"
  before=$(connections main)
  expect_status 0 "$RATELIMIT" acquire --rate 100/s --key owner
  [ $(($(connections main) - before)) -eq 2 ] || fail "a socket of another user's was used"
  chown root "$WORK/state/agent.sock"
else
  skip_part "another user and the agent's socket: needs root, setpriv and /usr/bin/python3"
fi

# --no-agent and RATELIMIT_NO_AGENT=1: no agent is started, each call connects itself.
export RATELIMIT_STATE_DIR=$WORK/direct
before=$(connections main)
expect_status 0 "$RATELIMIT" acquire --rate 100/s --key direct --no-agent
RATELIMIT_NO_AGENT=1 "$RATELIMIT" exec --rate 100/s --key direct -- true
[ ! -e "$WORK/direct/agent.sock" ] || fail "an agent started with --no-agent"
# Two connections, and the one that counts them.
[ $(($(connections main) - before)) -eq 3 ] || fail "direct calls did not connect themselves"

# An agent with nothing to do ends after its idle time and removes its socket.
export RATELIMIT_STATE_DIR=$WORK/idle RATELIMIT_AGENT_IDLE=1s
expect_status 0 "$RATELIMIT" acquire --rate 100/s --key idle
wait_for_file "$WORK/idle/agent.sock"
idle_pid=$(agent_pid "$WORK/idle")
sleep 2.5
! running "$idle_pid" || fail "the agent did not end when idle"
[ ! -e "$WORK/idle/agent.sock" ] || fail "the idle agent left its socket"
"$RATELIMIT" status --json | grep -Fq '"agent":null' || fail "status --json with no agent: $("$RATELIMIT" status --json)"

# Python that reads the agent's framed answers: receive(s, count) reads count bytes or raises.
read_framed='
import socket, struct, sys
def receive(s, count):
    data = b""
    while len(data) < count:
        chunk = s.recv(count - len(data))
        if not chunk:
            raise OSError("closed")
        data += chunk
    return data
'

# Requests of a form it does not read (from a client of another version, which then goes direct)
# are answered so, and keep no agent alive: it still ends when idle, and the next client starts
# one of its own version.
export RATELIMIT_STATE_DIR=$WORK/versions RATELIMIT_AGENT_IDLE=1s
expect_status 0 "$RATELIMIT" acquire --rate 100/s --key versions
wait_for_file "$WORK/versions/agent.sock"
versions_pid=$(agent_pid "$WORK/versions")
python3 -c "$read_framed"'
import time
answers = 0
end = time.monotonic() + 3
while time.monotonic() < end:
    try:
        s = socket.socket(socket.AF_UNIX)
        s.settimeout(1)
        s.connect(sys.argv[1])
        request = b"redis-command-0"
        s.sendall(struct.pack("=I", len(request)) + request)
        answers += receive(s, struct.unpack("=I", receive(s, 4))[0]) == b"11:unsupported"
        s.close()
    except OSError:
        pass
    time.sleep(0.2)
print(answers)' "$WORK/versions/agent.sock" >"$WORK/versions.answers"
[ "$(cat "$WORK/versions.answers")" -ge 1 ] || fail "no answer to a request of another form"
! running "$versions_pid" || fail "requests of another form kept the agent alive"
# Requests sent together are answered in their order, whichever thread has an answer first: the
# agent's own status at once, the others from a route.
export RATELIMIT_STATE_DIR=$WORK/order RATELIMIT_AGENT_IDLE=5s
expect_status 0 "$RATELIMIT" acquire --rate 100/s --key order
wait_for_file "$WORK/order/agent.sock"
order=$(python3 -c "$read_framed"'
import re
s = socket.socket(socket.AF_UNIX)
s.settimeout(5)
s.connect(sys.argv[1])
requests = [b"redis-command-0", b"agent-status"] * 3
s.sendall(b"".join(struct.pack("=I", len(r)) + r for r in requests))
for _ in requests:
    answer = receive(s, struct.unpack("=I", receive(s, 4))[0])
    print("route" if answer == b"11:unsupported" else
          "status" if re.fullmatch(rb"[0-9]+ [0-9]+ [0-9]+", answer) else answer)' "$WORK/order/agent.sock" |
  tr '\n' ' ')
[ "$order" = "route status route status route status " ] || fail "answers in the order: $order"

# A request answered later than the idle time keeps the agent until it is answered.
export RATELIMIT_STATE_DIR=$WORK/busy RATELIMIT_AGENT_IDLE=1s
expect_status 0 "$RATELIMIT" acquire --rate 100/s --key busy
wait_for_file "$WORK/busy/agent.sock"
busy_pid=$(agent_pid "$WORK/busy")
kill -STOP "$(cat "$WORK/main/pid")"
"$RATELIMIT" acquire --rate 100/s --key busy --redis-timeout 10s 2>"$WORK/busy.err" &
busy=$!
sleep 2
running "$busy_pid" || fail "the agent ended while it answered a request"
kill -CONT "$(cat "$WORK/main/pid")"
wait $busy || fail "the request answered late failed: $(cat "$WORK/busy.err")"
sleep 2.5
! running "$busy_pid" || fail "the agent did not end when idle after its late answer"
end_test
