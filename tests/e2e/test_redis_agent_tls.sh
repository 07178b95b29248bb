#!/usr/bin/env bash
# The host agent over rediss://: a call through it loads no TLS file of its own (the agent's
# connection serves it), yet a TLS file that cannot be used ends it with the line and the exit
# code of a direct call, files named as written (relative ones too); and what the agent says
# under -v while serving a call (a TLS session resumed) the caller says, as a direct call does.
# Under ThreadSanitizer too (label threaded), for the agent's threads: tests/e2e/under_tsan.sh.
source "$E2E_LIB"
source "$(dirname "${BASH_SOURCE[0]}")/redis_server.sh"
start_tls_main
plain=unix://$WORK/main/sock

# agent_deployments: the deployments the running agent serves (one connection each, once made).
agent_deployments() {
  "$RATELIMIT" status --redis "$plain" --json |
    python3 -c 'import json, sys; print(json.load(sys.stdin)["agent"]["connections"])'
}

# The agent runs before the calls below, started by a call on the server's plain socket.
expect_status 0 "$RATELIMIT" acquire --redis "$plain" --rate 1e9 --key start
wait_for_file "$WORK/state/agent.sock"
[ "$(agent_deployments)" = 1 ] || fail "the agent serves $(agent_deployments) deployments"

# -v: a direct call that resumes the session the call before it kept says so; so does the first
# call through the agent, whose new connection resumes that session; without -v, nothing.
expect_status 0 "$RATELIMIT" acquire --no-agent -v --redis "$url" "${ca[@]}" --rate 1e9 --key k
expect_status 0 "$RATELIMIT" acquire --no-agent -v --redis "$url" "${ca[@]}" --rate 1e9 --key k
direct=$(cat "$WORK/stderr")
[ "$direct" = "ratelimit: TLS session resumed with localhost:$port" ] || fail "direct: '$direct'"
expect_status 0 "$RATELIMIT" acquire -v --redis "$url" "${ca[@]}" --rate 1e9 --key k
expect_stderr "$direct"
[ "$(agent_deployments)" = 2 ] || fail "the rediss:// call did not go through the agent"
expect_status 0 "$RATELIMIT" acquire --redis "rediss://127.0.0.1:$port" "${ca[@]}" --rate 1e9 --key k
expect_stderr ""

# expect_same_failure STATUS LINE OPTIONS...: `exec OPTIONS` ends with STATUS and LINE alone, the
# command not run, direct and through the agent (which then serves one deployment more).
expect_same_failure() {
  local status=$1 line=$2 way deployments
  shift 2
  for way in direct agent; do
    local direct_option=()
    [ "$way" = direct ] && direct_option=(--no-agent)
    deployments=$(agent_deployments)
    expect_status "$status" "$RATELIMIT" exec "${direct_option[@]}" --rate 10/s --key f "$@" -- \
      touch "$WORK/ran"
    expect_stderr "$line"
    [ ! -e "$WORK/ran" ] || fail "the command ran ($way): $line"
    if [ "$way" = agent ]; then
      [ "$(agent_deployments)" = $((deployments + 1)) ] || fail "not through the agent: $line"
    fi
  done
}
random_file "$WORK/not.pem" 3000
# Files that cannot be used, by absolute name and (from their directory) relative.
expect_same_failure 66 "ratelimit: --redis-tls-ca $WORK/none.crt: No such file or directory" \
  --redis "$url" --redis-tls-ca "$WORK/none.crt"
expect_same_failure 64 "ratelimit: --redis-tls-ca $WORK/not.pem: no PEM certificate in it" \
  --redis "$url" --redis-tls-ca "$WORK/not.pem"
expect_same_failure 64 "ratelimit: --redis-tls-cert $tls/client.crt: no PEM private key in it (give it with --redis-tls-key FILE)" \
  --redis "$url" "${ca[@]}" --redis-tls-cert "$tls/client.crt"
(
  cd "$tls" || exit 1
  expect_same_failure 64 "ratelimit: --redis-tls-key server.key: not the key of the certificate in --redis-tls-cert client.crt" \
    --redis "$url" "${ca[@]}" --redis-tls-cert client.crt --redis-tls-key server.key
  expect_same_failure 66 "ratelimit: --redis-tls-ca none.crt: No such file or directory" \
    --redis "$url" --redis-tls-ca none.crt
  # A CA that did not sign the server's certificate: named as written in the hint.
  expect_same_failure 69 "ratelimit: Redis at $url: TLS: the server's certificate is not trusted: self-signed certificate in certificate chain (no CA in --redis-tls-ca other-ca.crt signed it)" \
    --redis "$url" --redis-tls-ca other-ca.crt
  # The files of the right name, relative: the agent finds them where the caller is.
  expect_status 0 "$RATELIMIT" acquire --redis "$url" --redis-tls-ca ca.crt \
    --redis-tls-cert client.crt --redis-tls-key client.key --rate 1e9 --key k
)
# TLS options without rediss://: said before anything is asked of the agent.
expect_status 64 "$RATELIMIT" acquire --redis "$plain" "${ca[@]}" --rate 10/s --key k
expect_stderr "ratelimit: the --redis-tls-* options need a rediss:// URL, not '$plain'"
