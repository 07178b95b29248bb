#!/usr/bin/env bash
# A Redis URL is read with the options: a bad one (--redis or $RATELIMIT_REDIS) exits 64 naming it,
# its password hidden, before anything runs, even on a command that would not use the store; so
# does a --redis-tls-* option beside a URL that is not rediss://. No server is needed.
source "$E2E_LIB"
export RATELIMIT_STATE_DIR=$WORK/state

bad_port="ratelimit: bad Redis URL 'redis://:***@localhost:0': the port must be a number from 1 to 65535"
# `set PID` sets a running pipe's rate and never opens the store.
expect_error "$bad_port" "$RATELIMIT" set 999999 --rate 5 --redis 'redis://:hunter2@localhost:0'
RATELIMIT_REDIS='redis://:hunter2@localhost:0' expect_error "$bad_port" "$RATELIMIT" set 999999 \
  --rate 5
expect_error "ratelimit: the --redis-tls-* options need a rediss:// URL, not 'redis://localhost'" \
  "$RATELIMIT" set 999999 --rate 5 --redis redis://localhost --redis-tls-insecure
# A good one is not used by such a command.
expect_status 66 "$RATELIMIT" set 999999 --rate 5 --redis 'unix:///nowhere/redis.sock'
grep -q 'no ratelimit pipe runs as process 999999' "$WORK/stderr" || fail "set: $(cat "$WORK/stderr")"
