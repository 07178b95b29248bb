#!/usr/bin/env bash
# rediss://: a redis-server serving TLS with certificates made here by openssl. The right CA
# passes; a wrong CA, another host name, an expired certificate and a missing client certificate
# each end with one line and 69; --redis-tls-insecure skips the checks with a warning;
# --redis-timeout bounds the handshake and a stop signal ends it; a pipe's bytes come out exact.
# Timing: loose bounds, run alone (RESOURCE_LOCK timing).
source "$E2E_LIB"
source "$(dirname "${BASH_SOURCE[0]}")/redis_server.sh"
export RATELIMIT_STATE_DIR=$WORK/state
start_tls_main

# The right CA, by name and by address (both in the certificate); the bucket is the one plain
# clients share.
expect_status 0 "$RATELIMIT" acquire --redis "$url" "${ca[@]}" --rate 1/h --key k
expect_status 75 "$RATELIMIT" acquire --redis "rediss://127.0.0.1:$port" "${ca[@]}" --try \
  --rate 1/h --key k
expect_status 75 "$RATELIMIT" acquire --redis "unix://$WORK/main/sock" --try --rate 1/h --key k
# --try over TLS: a server that answers is asked, handshake and all, within the grace.
expect_status 0 "$RATELIMIT" acquire --redis "$url" "${ca[@]}" --try --rate 1/h --key t

# Each failure: one line naming the URL and the cause, exit 69, the command not run.
expect_tls_failure() {
  local cause=$1
  shift
  expect_status 69 "$RATELIMIT" exec "$@" --rate 10/s --key f -- touch "$WORK/ran"
  expect_stderr "ratelimit: Redis at ${url_of_failure:-$url}: $cause"
  [ ! -e "$WORK/ran" ] || fail "the command ran after: $cause"
}
# serve CONFIG...: the server takes CONFIG (its certificate, say), and the connections made before
# (the host agent keeps its own) end: the next one is checked against what it serves now.
serve() {
  redis_cli main config set "$@" >/dev/null
  redis_cli main client kill type normal >/dev/null
}
# A wrong CA and none (the system's store does not know the test CA) each say what to do.
expect_tls_failure "TLS: the server's certificate is not trusted: self-signed certificate in certificate chain (no CA in --redis-tls-ca $tls/other-ca.crt signed it)" \
  --redis "$url" --redis-tls-ca "$tls/other-ca.crt"
expect_tls_failure "TLS: the server's certificate is not trusted: self-signed certificate in certificate chain (no CA of the system's store signed it: give its CA with --redis-tls-ca FILE)" \
  --redis "$url"
# Another name, or an address the certificate does not hold: the names it holds.
serve tls-cert-file "$tls/other-name.crt" tls-key-file "$tls/other-name.key"
expect_tls_failure "TLS: the server's certificate is not trusted: hostname mismatch (it is for elsewhere.test, not localhost: name one of those in the URL)" \
  --redis "$url" "${ca[@]}"
serve tls-cert-file "$tls/localhost-only.crt" tls-key-file "$tls/localhost-only.key"
url_of_failure=rediss://127.0.0.1:$port
expect_tls_failure "TLS: the server's certificate is not trusted: IP address mismatch (it is for localhost, not 127.0.0.1: name one of those in the URL)" \
  --redis "$url_of_failure" "${ca[@]}"
unset url_of_failure
serve tls-cert-file "$tls/expired.crt" tls-key-file "$tls/expired.key"
expect_tls_failure "TLS: the server's certificate is not trusted: certificate has expired" \
  --redis "$url" "${ca[@]}"

# --redis-tls-insecure takes the expired certificate, and says so.
expect_status 0 "$RATELIMIT" acquire --redis "$url" --redis-tls-insecure --rate 10/s --key i
expect_stderr "ratelimit: --redis-tls-insecure: the Redis server's certificate and name are not checked"

# A server that requires a client certificate: refused without one, granted with it.
serve tls-cert-file "$tls/server.crt" tls-key-file "$tls/server.key" tls-auth-clients yes
expect_tls_failure "TLS: the server requires a client certificate (--redis-tls-cert)" --redis "$url" "${ca[@]}"
expect_status 0 "$RATELIMIT" acquire --redis "$url" "${ca[@]}" --redis-tls-cert "$tls/client.crt" \
  --redis-tls-key "$tls/client.key" --rate 10/s --key c
export RATELIMIT_REDIS=$url
client=("${ca[@]}" --redis-tls-cert "$tls/client.crt" --redis-tls-key "$tls/client.key")

# A pipe keeps its connection: the bytes come out exact.
random_file "$WORK/in" 300000
expect_status 0 "$RATELIMIT" --key pipe --rate 2M "${client[@]}" <"$WORK/in" >"$WORK/out"
cmp "$WORK/in" "$WORK/out" || fail "the pipe over TLS changed its bytes"

# Files that cannot be used: 66 for one missing, 64 for one that is not PEM, and TLS options
# without rediss://.
expect_status 66 "$RATELIMIT" acquire --redis-tls-ca "$WORK/none.crt" --rate 10/s --key k
expect_stderr "ratelimit: --redis-tls-ca $WORK/none.crt: No such file or directory"
expect_status 64 "$RATELIMIT" acquire --redis-tls-ca "$WORK/in" --rate 10/s --key k
grep -q "^ratelimit: --redis-tls-ca $WORK/in: " "$WORK/stderr" || fail "not-PEM said $(cat "$WORK/stderr")"
expect_status 64 "$RATELIMIT" acquire --redis "unix://$WORK/main/sock" "${ca[@]}" --rate 10/s --key k
expect_stderr "ratelimit: the --redis-tls-* options need a rediss:// URL, not 'unix://$WORK/main/sock'"
# Nor without any Redis URL: not ignored for the state file.
(
  unset RATELIMIT_REDIS
  for options in "--redis-tls-ca $WORK/none.crt" --redis-tls-insecure; do
    # shellcheck disable=SC2086 # the options are words
    expect_status 64 "$RATELIMIT" acquire $options --key k --rate 5/s
    expect_stderr "ratelimit: the --redis-tls-* options need a rediss:// URL (--redis or \$RATELIMIT_REDIS)"
  done
)
# A FIFO (which would block the open or the read for good), a directory, a certificate without its
# key, a key that is not the certificate's: one line each, at once.
mkfifo "$WORK/fifo.pem"
for option in --redis-tls-ca --redis-tls-cert; do
  expect_status 66 timeout 10 "$RATELIMIT" acquire "$option" "$WORK/fifo.pem" --redis-timeout 1s \
    --rate 10/s --key k
  expect_stderr "ratelimit: $option $WORK/fifo.pem: not a regular file"
  expect_status 66 "$RATELIMIT" acquire "$option" "$WORK" --rate 10/s --key k
  expect_stderr "ratelimit: $option $WORK: Is a directory"
done
expect_status 66 timeout 10 "$RATELIMIT" acquire --redis-tls-cert "$tls/client.crt" \
  --redis-tls-key "$WORK/fifo.pem" --rate 10/s --key k
expect_stderr "ratelimit: --redis-tls-key $WORK/fifo.pem: not a regular file"
expect_status 64 "$RATELIMIT" acquire --redis-tls-cert "$tls/client.crt" --rate 10/s --key k
expect_stderr "ratelimit: --redis-tls-cert $tls/client.crt: no PEM private key in it (give it with --redis-tls-key FILE)"
expect_status 64 "$RATELIMIT" acquire --redis-tls-cert "$tls/client.crt" \
  --redis-tls-key "$tls/server.key" --rate 10/s --key k
expect_stderr "ratelimit: --redis-tls-key $tls/server.key: not the key of the certificate in --redis-tls-cert $tls/client.crt"

# A plain URL at the TLS port, and a TLS one at the plain port: a hint, not only the symptom.
expect_status 69 "$RATELIMIT" acquire --redis "redis://127.0.0.1:$port" --rate 10/s --key k
grep -qx "ratelimit: Redis at redis://127.0.0.1:$port: \(Connection reset by peer\|the server closed the connection\) before any reply: if this port speaks TLS, use rediss://" \
  "$WORK/stderr" || fail "redis:// at the TLS port said: $(cat "$WORK/stderr")"
plain_port=$(cat "$WORK/main/port")
expect_status 69 "$RATELIMIT" acquire --redis "rediss://127.0.0.1:$plain_port" "${ca[@]}" \
  --redis-timeout 300ms --rate 10/s --key k
expect_stderr "ratelimit: Redis at rediss://127.0.0.1:$plain_port: no TLS handshake within 300ms (a Redis port without TLS never answers one: use redis:// there)"

# A host that accepts the connection and never answers the handshake: --redis-timeout bounds
# it, and SIGTERM ends it at once.
python3 -c '
import socket, sys, time
listener = socket.socket()
listener.bind(("127.0.0.1", 0))
listener.listen(8)
with open(sys.argv[1], "w") as port:
    port.write(str(listener.getsockname()[1]))
held = []
while True:
    held.append(listener.accept()[0])
' "$WORK/silent.port" &
REDIS_PIDS+=($!)
until [ -s "$WORK/silent.port" ]; do sleep 0.01; done
url_of_failure=rediss://127.0.0.1:$(cat "$WORK/silent.port")
start=$(now_ns)
expect_tls_failure "no TLS handshake within 300ms (a Redis port without TLS never answers one: use redis:// there)" \
  --redis "$url_of_failure" --redis-timeout 300ms
ms=$(ms_since "$start")
[ "$ms" -ge 250 ] && [ "$ms" -lt 1000 ] || fail "a silent TLS handshake was given up after ${ms} ms"
expect_ended_by_signal TERM "in the TLS handshake" 300 \
  "$RATELIMIT" acquire --redis "$url_of_failure" --redis-timeout 30s --rate 10/s --key s

# A server that stops answering after the handshake: --redis-timeout still bounds the reply.
unset url_of_failure
expect_status 0 "$RATELIMIT" acquire "${client[@]}" --rate 10/s --key paused
[ "$(redis_cli main client pause 3000 all)" = OK ] || fail "CLIENT PAUSE failed"
start=$(now_ns)
expect_tls_failure "no reply within 300ms" "${client[@]}" --redis-timeout 300ms
ms=$(ms_since "$start")
[ "$ms" -ge 250 ] && [ "$ms" -lt 1000 ] || fail "a paused TLS server was given up after ${ms} ms"
