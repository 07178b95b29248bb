#!/usr/bin/env bash
# The flags with an optional value: -p as the docs show it, and a value after a space (taken as a
# file by the parser) explained instead of reported as a missing file.
source "$E2E_LIB"
cd "$WORK"

# shellcheck disable=SC2016 # the commands are quoted as the issue quotes them
seq 3 | "$RATELIMIT" -l --rate 20 -p >out 2>err || fail "'-p' failed: $(cat err)"
[ "$(cat out)" = "$(seq 3)" ] || fail "'-p' changed the output"

expect_status 64 bash -c 'seq 3 | "$RATELIMIT" -l --rate 20 --stats json'
expect_stderr "ratelimit: no file 'json': to give --stats a value, write --stats=json"
expect_status 64 bash -c 'seq 3 | "$RATELIMIT" -l --rate 20 --progress force'
expect_stderr "ratelimit: no file 'force': to give --progress a value, write --progress=force"

# A file that is really called json is still read.
seq 2 >json
[ "$("$RATELIMIT" -l --rate 1000 --stats json 2>/dev/null)" = "$(seq 2)" ] ||
  fail "a file named json was not read"
