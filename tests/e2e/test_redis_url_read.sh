#!/usr/bin/env bash
# A Redis URL is read with the options: a bad one (--redis or $RATELIMIT_REDIS) exits 64 naming it,
# its password hidden, before anything runs, even on a command that would not use the store; so
# does a --redis-tls-* option beside a URL that is not rediss://. No server is needed.
source "$E2E_LIB"
export RATELIMIT_STATE_DIR=$WORK/state

bad_port="ratelimit: bad Redis URL 'redis://:***@localhost:0': the port must be a number from 1 to 65535"
# A pipe without --key keeps its bucket in the process and never opens the store.
expect_error "$bad_port" "$RATELIMIT" --redis 'redis://:hunter2@localhost:0' --rate 1M
RATELIMIT_REDIS='redis://:hunter2@localhost:0' expect_error "$bad_port" "$RATELIMIT" --rate 1M
expect_error "$bad_port" "$RATELIMIT" acquire --redis 'redis://:hunter2@localhost:0' --rate 1 \
  --key x
expect_error "ratelimit: the --redis-tls-* options need a rediss:// URL, not 'redis://localhost'" \
  "$RATELIMIT" --redis redis://localhost --redis-tls-insecure --rate 1M
# A good URL on such a pipe is never used: nothing listens at it, and the bytes go through.
printf 'through\n' >"$WORK/in"
"$RATELIMIT" --redis 'unix:///nowhere/redis.sock' --rate 1M <"$WORK/in" >"$WORK/out" ||
  fail "a pipe without --key used the store"
cmp -s "$WORK/in" "$WORK/out" || fail "the pipe changed its bytes"
