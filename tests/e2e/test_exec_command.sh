#!/usr/bin/env bash
# exec runs CMD as if directly: status, stdio, signals, descriptors; 126/127 as the shell; usage.
source "$E2E_LIB"
export RATELIMIT_STATE_DIR=$WORK/state

run() { "$RATELIMIT" exec --rate 1000 --key cmd -- "$@"; }

expect_status 0 run true
expect_status 3 run sh -c 'exit 3'
# Without --, as with nice or timeout: from the command on, every argument is the command's, its
# options and a -- of its own included.
[ "$("$RATELIMIT" exec --rate 1000 --key cmd printf '%s,' --rate -k -- x)" = "--rate,-k,--,x," ] ||
  fail "the arguments after the command were not all passed to it"
expect_status 64 "$RATELIMIT" exec --rate 1000 --bogus printf x
grep -q -- '--bogus' "$WORK/stderr" || fail "an unknown option before the command is not named"

# Every argument reaches the command byte for byte, whatever its shape: brackets and commas (a
# list to CLI11), quotes, =, -, --, the options of ratelimit and of exec, empty words, spaces,
# newlines, bytes that are not UTF-8; with or without --, and after each way of giving exec's options.
shapes=('[x]' '[a,b]' '[]' 'a,b' ',' '{a}' '"q"' "'s'" '--' '-' 'a=b' '--rate=5' '-V' '--version'
  '--help' '-h' '--rate' '10/s' '-k' '--try' '-5' 'exec' 'acquire' '' ' ' ' lead' 'trail ' 'a b'
  $'line\nbreak' $'\n' $'\xff\xfe' '\' '%s' '*' '!' '@file')
printf '<%s>\n' "${shapes[@]}" >"$WORK/direct"
for options in '--rate 1000 --key args --' '--rate 1000 --key args' '--rate=1000 --key=args' \
  '-r1000 -vk args' '-r 1000 -vkargs --'; do
  # shellcheck disable=SC2086 # the options are words
  "$RATELIMIT" exec $options printf '<%s>\n' "${shapes[@]}" >"$WORK/through"
  cmp -s "$WORK/direct" "$WORK/through" ||
    fail "exec $options: the command's arguments were changed: $(diff "$WORK/direct" "$WORK/through" | cat -A)"
done
# The command word too: '[' is test(1).
expect_status 0 run [ '[x]' = '[x]' ]
[ "$(echo hello | run tr a-z A-Z)" = HELLO ] || fail "stdin/stdout do not reach the command"
[ "$(run sh -c 'echo oops >&2' 2>&1 >/dev/null)" = oops ] || fail "stderr does not reach the command"

# A command killed by a signal is seen by the shell as killed, not as a status ratelimit chose.
expect_status 143 run sh -c 'kill -TERM $$'
expect_status 141 run sh -c 'kill -PIPE $$'

# The command is ratelimit's process (exec, no fork): its pid is the one the shell started.
"$RATELIMIT" exec --rate 1000 --key cmd -- sh -c 'echo $$ >"$0"' "$WORK/pid" &
wait $!
[ "$(cat "$WORK/pid")" = "$!" ] || fail "the command did not replace ratelimit (pid $(cat "$WORK/pid") != $!)"

# Signal mask, ignored signals and open descriptors are exactly those of a direct run: ratelimit's
# bucket descriptor and its signal handling do not leak into the command.
probe() { "$@" grep -E '^(SigBlk|SigIgn)' /proc/self/status && "$@" ls /proc/self/fd; }
direct=$(probe)
through=$(probe run)
[ "$direct" = "$through" ] || fail "the command's signals or descriptors differ: '$through' vs '$direct'"
direct=$(trap '' PIPE HUP; probe)
through=$(trap '' PIPE HUP; probe run)
[ "$direct" = "$through" ] || fail "inherited ignored signals (nohup) are not passed on: '$through'"
grep -q 'SigIgn:.*[1-9]' <<<"$direct" || fail "the probe of ignored signals sees none"

# Not found and not executable, as the shell says them.
expect_status 127 run no-such-command-here
expect_stderr "ratelimit: no-such-command-here: command not found"
printf 'echo hi\n' >"$WORK/not-executable"
expect_status 126 run "$WORK/not-executable"
expect_stderr "ratelimit: $WORK/not-executable: Permission denied"
# Looked up before the permit is taken: a command that cannot run neither waits for a permit nor
# uses one up (the bucket's free first permit is still there for --try).
expect_status 127 "$RATELIMIT" exec --rate 1/3s --key lookup -- no-such-command-here
expect_status 126 "$RATELIMIT" exec --rate 1/3s --key lookup -- "$WORK/not-executable"
expect_status 0 "$RATELIMIT" acquire --rate 1/3s --key lookup --try
# A script without #! is run by sh, as the shell does.
printf 'exit 7\n' >"$WORK/script"
chmod +x "$WORK/script"
expect_status 7 run "$WORK/script"

# Bad input: one line naming the bad value, exit 64, nothing run.
expect_usage_error() {
  expect_status 64 "$RATELIMIT" "$@"
  [ "$(wc -l <"$WORK/stderr")" -eq 1 ] || fail "'$*': the error is not one line: $(cat "$WORK/stderr")"
  grep -q "^ratelimit: .*$expected_text" "$WORK/stderr" || fail "'$*': the error does not name '$expected_text': $(cat "$WORK/stderr")"
}
expected_text='--rate' expect_usage_error exec -- touch "$WORK/ran"
expected_text='2x' expect_usage_error exec --rate 2x -- touch "$WORK/ran"
expected_text='kB' expect_usage_error exec --rate 10kB/s -- touch "$WORK/ran"
expected_text='--permits' expect_usage_error exec --rate 1 --permits 0 -- touch "$WORK/ran"
expected_text='--try' expect_usage_error exec --rate 1 --try --timeout 1s -- touch "$WORK/ran"
expected_text='5q' expect_usage_error exec --rate 1 --timeout 5q -- touch "$WORK/ran"
expected_text='--max-inflight' expect_usage_error exec --rate 1 --max-inflight 0 -- touch "$WORK/ran"
expected_text="key ''" expect_usage_error exec --rate 1 --key '' -- touch "$WORK/ran"
expected_text='command' expect_usage_error exec --rate 1
expected_text='command' expect_usage_error exec --rate 1 --key args --
[ ! -e "$WORK/ran" ] || fail "a command ran despite a usage error"

# acquire is the same without a command.
expect_status 0 "$RATELIMIT" acquire --rate 1000 --key cmd
expected_text='--rate' expect_usage_error acquire --key k
expected_text='--key' expect_usage_error acquire --rate 1
