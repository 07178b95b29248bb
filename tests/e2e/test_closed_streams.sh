#!/usr/bin/env bash
# Closed standard streams fail as cat's do (74 for the output, 66 for the input), and no descriptor
# of ratelimit's own (the control FIFO, a lock or slot file) ever takes the number 0, 1 or 2.
source "$E2E_LIB"
export RATELIMIT_STATE_DIR=$WORK/state
printf 'data\n' >"$WORK/in"

expect_status 74 timeout 10 "$RATELIMIT" --rate 1G "$WORK/in" >&-
expect_stderr "ratelimit: standard output: Bad file descriptor"
expect_status 74 timeout 10 "$RATELIMIT" -l --rate 1G "$WORK/in" >&-

# A line that looks like a rate, then data: neither read as a `set` message nor taken as written.
from_producer() {
  (printf '1\n'; sleep 1; printf 'abcdefgh\n') | "$RATELIMIT" --rate 1G >&-
}
expect_status 74 timeout 10 bash -c "$(declare -f from_producer); RATELIMIT=$RATELIMIT from_producer"

expect_status 66 timeout 10 "$RATELIMIT" --rate 1G <&-
expect_stderr "ratelimit: standard input: Bad file descriptor"
expect_status 66 timeout 10 "$RATELIMIT" --rate 1G - "$WORK/in" <&-
# Closed streams that are not used are no error, and a closed standard error loses only messages.
expect_status 0 timeout 10 "$RATELIMIT" --rate 1G "$WORK/in" -o "$WORK/out" <&- >&-
cmp "$WORK/in" "$WORK/out" || fail "-o with closed standard streams changed the data"
expect_status 0 timeout 10 "$RATELIMIT" --rate 1G "$WORK/in" -o "$WORK/out" 2>&-

# exec: the command finds the streams closed as they were given, and its output reaches no slot
# or bucket file.
# The marker is text that a binary record cannot hold by chance (a lone "x" can be in a checksum).
marker=written-by-the-command
status=0
sh -c "echo $marker" >&- 2>/dev/null || status=$?
expect_status "$status" "$RATELIMIT" exec --rate 1000/s --key k --max-inflight 1 -- sh -c "echo $marker" <&- >&-
! grep -rq "$marker" "$WORK/state" || fail "the command wrote into a file of the state directory"
expect_status 0 "$RATELIMIT" exec --rate 1000/s --key k --max-inflight 1 -- sh -c 'test ! -e /dev/fd/0 && test ! -e /dev/fd/1' <&- >&-
