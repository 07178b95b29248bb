#!/usr/bin/env bash
# A new user's slips: an unknown command after `help`, a misspelt choice, a value split from its
# unit or written with a decimal comma, -p=force, acquire given a command. Each is one line that
# says what was meant, and exit 64 before anything runs.
source "$E2E_LIB"
export RATELIMIT_STATE_DIR=$WORK/state
cd "$WORK"

expect_error "ratelimit: unknown command 'nosuch' (the commands are exec, acquire, status, reset, set)" \
  "$RATELIMIT" help nosuch
expect_error "ratelimit: unknown command 'exce'; did you mean 'exec'?" "$RATELIMIT" help exce
[ "$("$RATELIMIT" help status)" = "$("$RATELIMIT" status --help)" ] || fail "'help status' is not status's help"

# Choices: one line naming them, and the nearest.
expect_error "ratelimit: --on-redis-error: invalid value 'lcoal': expected fail, allow or local; did you mean 'local'?" \
  "$RATELIMIT" acquire --rate 5 --key a --on-redis-error=lcoal
expect_error "ratelimit: --on-redis-error: invalid value 'never': expected fail, allow or local" \
  "$RATELIMIT" exec --rate 5 --on-redis-error never -- true
expect_error "ratelimit: --progress: invalid value 'forse': expected auto or force; did you mean 'force'?" \
  "$RATELIMIT" --rate 5 --progress=forse
expect_error "ratelimit: --stats: invalid value 'jsn': expected text or json; did you mean 'json'?" \
  "$RATELIMIT" --rate 5 --stats=jsn
# Any case, as before.
echo hi | "$RATELIMIT" --rate 1k --stats=JSON >/dev/null 2>"$WORK/stats" || fail "--stats=JSON: $(cat "$WORK/stats")"
grep -q '^{' "$WORK/stats" || fail "--stats=JSON printed no JSON: $(cat "$WORK/stats")"
"$RATELIMIT" acquire --rate 5 --key a --on-redis-error=Local || fail "--on-redis-error=Local refused"

# A value split from its unit: the stray word is no file, command or argument.
expect_error "ratelimit: no file 'kb': did you mean --rate 5kB (or 5kbit)?" "$RATELIMIT" --rate 5 kb
expect_error "ratelimit: no file 'M': did you mean --rate 5M?" "$RATELIMIT" --rate=5 M
expect_error "ratelimit: no file 's': did you mean --burst 2s?" "$RATELIMIT" --rate 5 --burst 2 s
expect_error "ratelimit: stray word 's': did you mean --timeout 2s?" \
  "$RATELIMIT" acquire --rate 5 --key t --timeout 2 s
expect_error "ratelimit: stray word '/s': did you mean --rate 2/s?" "$RATELIMIT" exec --rate 2 /s -- true
expect_error "ratelimit: stray word 'k': did you mean --rate 20k?" "$RATELIMIT" set 4242 --rate 20 k
# A file of that name is a file.
echo data >kb
[ "$("$RATELIMIT" --rate 5k kb)" = data ] || fail "a file named kb was not read"
[ "$("$RATELIMIT" --rate 5 kb)" = data ] || fail "a file named kb after --rate 5 was not read"
# A word that is no unit is a missing file, as before.
expect_status 66 "$RATELIMIT" --rate 5 notes.txt
expect_stderr "ratelimit: notes.txt: No such file or directory"

# A decimal comma.
expect_error "ratelimit: --rate: invalid rate '1,5M': use a decimal point (1.5M)" "$RATELIMIT" --rate 1,5M
expect_error "ratelimit: --timeout: invalid duration '0,5s': use a decimal point (0.5s)" \
  "$RATELIMIT" acquire --rate 5 --key t --timeout=0,5s

# -p takes its value only as --progress=VALUE.
expect_error "ratelimit: invalid option '-p=force': write --progress=force" "$RATELIMIT" --rate 5 -p=force

# acquire runs nothing: exec does.
expect_error "ratelimit: acquire runs no command: did you mean 'ratelimit exec --rate 2/s -- echo hi'?" \
  "$RATELIMIT" acquire --rate 2/s -- echo hi
expect_error "ratelimit: acquire runs no command: did you mean 'ratelimit exec --rate 2/s --key k -- echo hi'?" \
  "$RATELIMIT" acquire --rate 2/s --key k echo hi

# Unexpected words are listed in the order given.
expect_error "ratelimit: The following arguments were not expected: foo bar" "$RATELIMIT" status foo bar
