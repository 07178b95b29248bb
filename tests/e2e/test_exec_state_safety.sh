#!/usr/bin/env bash
# The state directory and files cannot be turned against the user; bad records are survived.
source "$E2E_LIB"
state=$WORK/state
mkdir -m 700 "$state"

# A symlink planted at a state file's path is not followed: its target is untouched.
echo precious >"$WORK/target"
ln -s "$WORK/target" "$state/api.bucket"
expect_status 77 "$RATELIMIT" exec --rate 5 --key api --state-dir "$state" -- touch "$WORK/ran"
grep -q "symbolic link" "$WORK/stderr" || fail "the error does not say why: $(cat "$WORK/stderr")"
[ "$(cat "$WORK/target")" = precious ] || fail "the symlink's target was written"
[ ! -e "$WORK/ran" ] || fail "the command ran despite the symlink"
rm "$state/api.bucket"

# A directory others may write to is refused, naming it.
mkdir -m 777 "$WORK/open"
chmod 777 "$WORK/open"
expect_status 77 "$RATELIMIT" exec --rate 5 --state-dir "$WORK/open" -- touch "$WORK/ran"
grep -q "^ratelimit: state directory '$WORK/open' is writable by group or others" "$WORK/stderr" ||
  fail "unexpected error: $(cat "$WORK/stderr")"
[ ! -e "$WORK/ran" ] || fail "the command ran in an unsafe directory"
RATELIMIT_STATE_DIR=$WORK/open expect_status 77 "$RATELIMIT" acquire --rate 5 --key k
expect_status 77 "$RATELIMIT" status --state-dir "$WORK/open"

# A missing directory is created private.
expect_status 0 "$RATELIMIT" acquire --rate 5 --key k --state-dir "$WORK/new"
[ "$(stat -c %a "$WORK/new")" = 700 ] || fail "the state directory was created $(stat -c %a "$WORK/new")"
[ "$(stat -c %a "$WORK/new/k.bucket")" = 600 ] || fail "the state file is not 0600"

# Keys cannot reach other paths.
expect_status 0 "$RATELIMIT" acquire --rate 5 --state-dir "$state" --key ../escape
[ ! -e "$WORK/escape.bucket" ] && [ -e "$state/%2E%2E%2Fescape.bucket" ] || fail "a key escaped the directory"

# A corrupt or truncated record is a fresh bucket (said under --verbose), never a crash.
expect_status 0 "$RATELIMIT" acquire --rate 1/s --state-dir "$state" --key c
head -c 5000 /dev/urandom >"$state/c.bucket"
expect_status 0 "$RATELIMIT" acquire --rate 1/s --state-dir "$state" --key c --verbose --try
grep -q "key 'c': .*starting a fresh bucket" "$WORK/stderr" || fail "--verbose does not say the record was discarded"
head -c 30 "$state/c.bucket" >"$state/c.trunc" && mv "$state/c.trunc" "$state/c.bucket"
expect_status 0 "$RATELIMIT" acquire --rate 1/s --state-dir "$state" --key c --try
[ ! -s "$WORK/stderr" ] || fail "without --verbose a discarded record is reported: $(cat "$WORK/stderr")"
: >"$state/c.bucket"
expect_status 0 "$RATELIMIT" acquire --rate 1/s --state-dir "$state" --key c --try
# The bucket is in use again: the next --try is refused.
expect_status 75 "$RATELIMIT" acquire --rate 1/s --state-dir "$state" --key c --try

# A state directory that cannot be made: the store is unavailable (69), for a pipe with --key too,
# and nothing runs or is written.
expect_status 69 "$RATELIMIT" exec --rate 5 --state-dir "$WORK/no/such/parent" -- touch "$WORK/ran"
expect_stderr "ratelimit: create state directory '$WORK/no/such/parent': No such file or directory"
[ ! -e "$WORK/ran" ] || fail "exec ran its command without a store"
echo data | expect_status 69 "$RATELIMIT" --rate 1k --key k --state-dir "$WORK/no/such/parent" -o "$WORK/out"
[ ! -s "$WORK/out" ] || fail "a pipe without its store wrote '$(cat "$WORK/out")'"
