#!/usr/bin/env bash
# A Redis host name is resolved within --redis-timeout and under the stop signals, without NSS
# (the binary is static): from /etc/hosts, and from the name server of /etc/resolv.conf, here one
# that never answers.
# The test runs in private mount and network namespaces (unshare -mn: root only), where its own
# resolv.conf and hosts are bound over /etc's and the name server is a silent UDP listener on the
# namespace's own loopback: nothing leaves it, and the host's files are never touched.
# Timing: loose bounds, run alone (RESOURCE_LOCK timing).
if [ -z "${RATELIMIT_RESOLVE_TEST_INSIDE:-}" ]; then
  if ! unshare -mn true 2>/dev/null; then
    source "$E2E_LIB"
    skip "unshare -mn is not permitted here (needs root)"
  fi
  RATELIMIT_RESOLVE_TEST_INSIDE=1 exec unshare -mn bash "${BASH_SOURCE[0]}"
fi
source "$E2E_LIB"
source "$(dirname "${BASH_SOURCE[0]}")/redis_server.sh"
export RATELIMIT_STATE_DIR=$WORK/state
ip link set lo up
echo "nameserver 127.0.0.1" >"$WORK/resolv.conf"
printf '127.0.0.1 localhost redis.test\n' >"$WORK/hosts"
mount --bind "$WORK/resolv.conf" /etc/resolv.conf
mount --bind "$WORK/hosts" /etc/hosts

python3 -c '
import socket, sys, time
silent = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
silent.bind(("127.0.0.1", 53))
open(sys.argv[1], "w").close()
while True:
    silent.recv(512)
' "$WORK/dns.ready" &
dns=$!
REDIS_PIDS+=($dns)
wait_for_file "$WORK/dns.ready"

# A name in /etc/hosts reaches the server.
start_redis main
expect_status 0 "$RATELIMIT" acquire --redis "redis://redis.test:$(cat "$WORK/main/port")" \
  --rate 10/s --key k

# An address needs no lookup: the silent name server is never asked (10 calls, each well within
# the timeout).
for _ in $(seq 10); do
  expect_status 0 "$RATELIMIT" acquire --redis "redis://127.0.0.1:$(cat "$WORK/main/port")" \
    --redis-timeout 200ms --rate 1e9 --key k
done

# A name only the silent name server could give: 69 after the timeout, naming the host.
start=$(now_ns)
expect_status 69 "$RATELIMIT" acquire --redis redis://silent.test:6379 --redis-timeout 200ms \
  --rate 10/s --key k
ms=$(ms_since "$start")
expect_stderr "ratelimit: Redis at redis://silent.test:6379: no address for silent.test within 200ms"
[ "$ms" -ge 150 ] && [ "$ms" -lt 1000 ] || fail "resolving on a silent name server took ${ms} ms"

# SIGTERM while resolving ends it at once.
expect_ended_by_signal TERM "while resolving" 300 \
  "$RATELIMIT" acquire --redis redis://silent.test:6379 --redis-timeout 30s --rate 10/s --key k
