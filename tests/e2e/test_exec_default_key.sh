#!/usr/bin/env bash
# Without --key, exec shares the bucket of its command's name, so unrelated loops neither refuse
# each other nor change each other's rate; acquire, which has no command, needs --key.
source "$E2E_LIB"
export RATELIMIT_STATE_DIR=$WORK/state

expect_status 0 "$RATELIMIT" exec --rate 1/m --try -- true
# Another command: another bucket, at its own rate, without a notice.
expect_status 0 "$RATELIMIT" exec --rate 2/m --try -- echo hi >/dev/null
[ ! -s "$WORK/stderr" ] || fail "an unrelated loop changed the first one's bucket: $(cat "$WORK/stderr")"
# The same command by another path: the same bucket, whose permit is taken.
expect_status 75 "$RATELIMIT" exec --rate 1/m --try -- "$(command -v true)"
# --key still names the bucket.
expect_status 0 "$RATELIMIT" exec --rate 1/m --try --key other -- true
expect_status 75 "$RATELIMIT" exec --rate 1/m --try --key other -- echo hi
(cd "$WORK/state" && ls) >"$WORK/buckets"
[ "$(cat "$WORK/buckets")" = "$(printf '%s\n' echo.bucket other.bucket true.bucket)" ] ||
  fail "unexpected buckets: $(cat "$WORK/buckets")"

expect_status 64 "$RATELIMIT" acquire --rate 5/s
expect_stderr "ratelimit: acquire needs --key NAME: the bucket that the calls of one loop share (e.g. --key mail)"
expect_status 0 "$RATELIMIT" acquire --rate 5/s --key mail

grep -q -- "--key NAME .*the command's name" <<<"$("$RATELIMIT" exec --help)" || fail "exec --help does not say the key's default"
grep -q -- "--key NAME .*(required)" <<<"$("$RATELIMIT" acquire --help)" || fail "acquire --help does not say --key is required"
