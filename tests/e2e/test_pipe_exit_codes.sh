#!/usr/bin/env bash
# Exit codes and messages of pipe mode: 64 usage, 66 input, 74 output, 141 downstream closed.
source "$E2E_LIB"

echo data >"$WORK/in"

# 64: one line naming the bad value.
for args in "--rate 5x" "--rate abc" "--rate 10 --chunk 1q" "--rate 10 --burst 2x" \
  "--rate 10 --warmup soon" "-l --rate 5MB/s" "-0 --rate 8kbit" "--rate 10 --delimiter ab" \
  "--rate 10 --progress=sometimes" "--rate 10 -l -0" "--rate 10 --warmup 1s --cold-factor nan" \
  "--rate 1e-300 --burst 1e308" "--rate 10 --chunk 0"; do
  # shellcheck disable=SC2086 # $args is several words
  expect_status 64 "$RATELIMIT" $args "$WORK/in"
  [ "$(wc -l <"$WORK/stderr")" -eq 1 ] || fail "'$args': not one line: $(cat "$WORK/stderr")"
  grep -q '^ratelimit: ' "$WORK/stderr" || fail "'$args': no 'ratelimit: ' prefix"
done
expect_status 64 "$RATELIMIT" --rate 5x "$WORK/in"
grep -q "'5x'" "$WORK/stderr" || fail "the bad rate is not named"
expect_status 64 "$RATELIMIT" --rate 10 --warmup 1s --cold-factor 0.5 "$WORK/in"
expect_stderr "ratelimit: --cold-factor: '0.5' is not a number from 1 to 1000000"
expect_status 64 "$RATELIMIT" set abc --rate 5
expect_stderr "ratelimit: PID: 'abc' is not a whole number from 1 to 2147483647"
expect_status 64 "$RATELIMIT" "$WORK/in"
grep -q -- '--rate is required' "$WORK/stderr" || fail "missing --rate not reported"

# 66: inputs are all checked before anything is written.
expect_status 66 "$RATELIMIT" --rate 1M "$WORK/in" "$WORK/missing" -o "$WORK/out"
expect_stderr "ratelimit: $WORK/missing: No such file or directory"
[ ! -s "$WORK/out" ] || fail "wrote before checking every input"
expect_status 66 "$RATELIMIT" --rate 1M "$WORK"
expect_stderr "ratelimit: $WORK: Is a directory"
# 66: a file this user may not read. Root reads anything, so as root the check runs as nobody.
printf 'secret\n' >"$WORK/unreadable"
chmod 000 "$WORK/unreadable"
as_user=()
if [ "$(id -u)" -eq 0 ]; then
  chmod 755 "$WORK"
  as_user=(setpriv --reuid=nobody --regid=nogroup --clear-groups)
fi
expect_status 66 "${as_user[@]}" "$RATELIMIT" --rate 1M "$WORK/unreadable"
expect_stderr "ratelimit: $WORK/unreadable: Permission denied"

# 66: an input that is also the output is refused before it is truncated, as cat does.
cp "$WORK/in" "$WORK/same"
expect_status 66 "$RATELIMIT" --rate 1M "$WORK/same" -o "$WORK/same"
expect_stderr "ratelimit: $WORK/same: input file is output file"
cmp "$WORK/in" "$WORK/same" || fail "the input was truncated"
# shellcheck disable=SC2094 # reading and writing the same file is the point
expect_status 66 "$RATELIMIT" --rate 1M "$WORK/same" >>"$WORK/same"
cmp "$WORK/in" "$WORK/same" || fail "the input was appended to itself"
# An output that is no input is truncated as usual.
"$RATELIMIT" --rate 1M "$WORK/in" -o "$WORK/same"
cmp "$WORK/in" "$WORK/same" || fail "-o did not replace the file"
seq 1000 >"$WORK/long"
"$RATELIMIT" --rate 1M "$WORK/in" -o "$WORK/long"
cmp "$WORK/in" "$WORK/long" || fail "-o did not truncate a longer file"

# 74: the output cannot be written, with the reason.
expect_status 74 "$RATELIMIT" --rate 1M "$WORK/in" -o /dev/full
expect_stderr "ratelimit: write /dev/full: No space left on device"
expect_status 74 "$RATELIMIT" --rate 1M "$WORK/in" -o "$WORK/no/such/dir"

# 141: downstream closed early, quietly, in both paths.
for source in /dev/zero -; do
  set +e
  head -c 10000000 /dev/zero | "$RATELIMIT" --rate 1G "$source" 2>"$WORK/stderr" | head -c 1000 >/dev/null
  status=${PIPESTATUS[1]}
  set -e
  [ "$status" -eq 141 ] || fail "downstream closed ($source): exit $status, expected 141"
  [ ! -s "$WORK/stderr" ] || fail "downstream closed ($source): not quiet: $(cat "$WORK/stderr")"
done

# `set` names a process that runs no pipe.
expect_status 66 "$RATELIMIT" set 999999 --rate 5
grep -q 'no ratelimit pipe runs as process 999999' "$WORK/stderr" || fail "set: $(cat "$WORK/stderr")"
