#!/usr/bin/env bash
# Each command's help: its own examples in its own units, options rendered as the man page writes
# them, -V everywhere, `help`, and misspelt or misplaced words answered with what was meant.
source "$E2E_LIB"
export RATELIMIT_STATE_DIR=$WORK/state

for command in "" exec acquire status reset set; do
  # shellcheck disable=SC2086 # "" is no command
  help=$("$RATELIMIT" $command --help)
  grep -qE 'TEXT|INT:|FLOAT|\{auto\}|\{text\}|Excludes|Needs|9223372036854775807' <<<"$help" &&
    fail "'ratelimit $command --help' renders CLI11 internals: $(grep -E 'TEXT|INT:|FLOAT|\{|Excludes|Needs' <<<"$help")"
  [ -z "$command" ] && continue
  examples=$(sed -n '/^Examples\?:/,$p' <<<"$help")
  grep -q "ratelimit $command " <<<"$examples" || fail "'ratelimit $command --help' has no example of its own"
  grep -q "ratelimit [^$command]" <<<"$examples" && fail "'ratelimit $command --help' shows other commands' examples"
  # shellcheck disable=SC2086
  [ "$("$RATELIMIT" $command -V)" = "$("$RATELIMIT" --version)" ] || fail "'ratelimit $command -V' is not the version"
done
grep -q 'MiB' <<<"$("$RATELIMIT" exec --help)" && fail "exec --help suggests a byte rate, which exec refuses"
grep -qx '  -p,--progress\[=force\] .*' <<<"$("$RATELIMIT" --help)" || fail "--help does not show -p,--progress[=force]"
grep -qx '  --permits N .*\[default: 1\]' <<<"$("$RATELIMIT" exec --help)" || fail "--permits is not shown as 'N [default: 1]'"

[ "$("$RATELIMIT" help)" = "$("$RATELIMIT" --help)" ] || fail "'ratelimit help' is not the help"
[ "$("$RATELIMIT" help exec)" = "$("$RATELIMIT" exec --help)" ] || fail "'ratelimit help exec' is not exec's help"

expect_status 64 "$RATELIMIT" exce true
expect_stderr "ratelimit: exce: neither a file nor a command; did you mean 'exec'?"
expect_status 64 "$RATELIMIT" --rate 5 exec -- true
expect_stderr "ratelimit: 'exec' is a command and comes first: ratelimit exec --rate 5 -- true"
expect_status 64 "$RATELIMIT" --rat 5
expect_stderr "ratelimit: The following argument was not expected: --rat; did you mean --rate?"
# A file of a near name is a file, as before.
cd "$WORK" && echo data >exce
[ "$("$RATELIMIT" --rate 1k exce)" = data ] || fail "a file named exce was not read"
