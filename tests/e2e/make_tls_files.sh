#!/usr/bin/env bash
# make_tls_files.sh DIR: in DIR, for tests and benchmarks of rediss://, a test CA (ca.crt), a
# server certificate it signed for localhost and 127.0.0.1 (server.crt, server.key), a client
# certificate (client.crt, client.key), and for the failures: another CA (other-ca.crt), a server
# certificate for another name (other-name.crt, .key), one for localhost but not its address
# (localhost-only.crt, .key) and one that expired as it was made (expired.crt, .key). EC keys: fast to make.
set -euo pipefail
mkdir -p "$1"
cd "$1"
new_key() {
  openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:prime256v1 -out "$1" 2>/dev/null
}
new_key ca.key
openssl req -x509 -key ca.key -out ca.crt -days 2 -subj /CN=ratelimit-test-ca 2>/dev/null
new_key other-ca.key
openssl req -x509 -key other-ca.key -out other-ca.crt -days 2 -subj /CN=another-ca 2>/dev/null
# sign NAME DAYS SUBJECT_ALT_NAMES: NAME.key and NAME.crt, signed by ca.key.
sign() {
  new_key "$1.key"
  openssl req -new -key "$1.key" -subj "/CN=$1" -addext "subjectAltName=$3" -out "$1.csr" \
    2>/dev/null
  openssl x509 -req -in "$1.csr" -CA ca.crt -CAkey ca.key -set_serial "$RANDOM$RANDOM" \
    -days "$2" -copy_extensions copy -out "$1.crt" 2>/dev/null
}
sign server 2 DNS:localhost,IP:127.0.0.1
sign client 2 DNS:ratelimit-client
sign other-name 2 DNS:elsewhere.test
sign localhost-only 2 DNS:localhost
sign expired 0 DNS:localhost,IP:127.0.0.1
