#!/usr/bin/env bash
# Pipe mode moves every byte unchanged: random binary data in byte, line and NUL modes, several
# files, -o, and both the splice and the read/write path.
# shellcheck disable=SC2002 # cat into ratelimit: its input must be a pipe
source "$E2E_LIB"

random_file "$WORK/a" 300000
random_file "$WORK/b" 123457
cat "$WORK/a" "$WORK/b" >"$WORK/ab"

# Byte mode, stdin pipe to stdout pipe (splice).
cat "$WORK/a" | "$RATELIMIT" --rate 50M | cat >"$WORK/out"
cmp "$WORK/a" "$WORK/out" || fail "byte mode, pipe to pipe"

# Regular file to regular file with -o (read/write: neither end is a pipe).
"$RATELIMIT" --rate 50MB/s "$WORK/a" -o "$WORK/out"
cmp "$WORK/a" "$WORK/out" || fail "byte mode, file to -o file"

# Several files, with standard input in the middle, as cat.
head -c 777 /dev/urandom >"$WORK/c"
cat "$WORK/c" | "$RATELIMIT" --rate 400Mbit/s "$WORK/a" - "$WORK/b" >"$WORK/out"
cat "$WORK/a" "$WORK/c" "$WORK/b" | cmp - "$WORK/out" || fail "several files and -"

# Line, NUL and custom-delimiter modes on binary data (it has all three separators).
for mode in -l -0 "--delimiter=x" "--delimiter=\\t"; do
  "$RATELIMIT" $mode --rate 1G --chunk 300 "$WORK/ab" | cat >"$WORK/out"
  cmp "$WORK/ab" "$WORK/out" || fail "record mode $mode"
done

# Small chunks and a small rate still lose nothing; a last line without a newline is written.
printf 'one\ntwo\nthree' | "$RATELIMIT" -l --rate 1000 >"$WORK/out"
[ "$(cat "$WORK/out")" = $'one\ntwo\nthree' ] || fail "last line without newline"

# The zero-copy path is taken when an end is a pipe, and read/write when neither is.
strace -f -e trace=splice -o "$WORK/trace" "$RATELIMIT" --rate 50M "$WORK/a" -o /dev/null
! grep -q 'splice(' "$WORK/trace" || fail "spliced between two non-pipes"
cat "$WORK/a" | strace -f -e trace=splice -o "$WORK/trace" "$RATELIMIT" --rate 50M -o "$WORK/out"
grep -q 'splice(' "$WORK/trace" || fail "did not splice from a pipe"
cmp "$WORK/a" "$WORK/out" || fail "spliced pipe to file"
strace -f -e trace=splice -o "$WORK/trace" "$RATELIMIT" --rate 50M "$WORK/a" | cat >"$WORK/out"
grep -q 'splice(' "$WORK/trace" || fail "did not splice into a pipe"
cmp "$WORK/a" "$WORK/out" || fail "spliced file to pipe"
# Record modes always copy (they must see the delimiters).
cat "$WORK/a" | strace -f -e trace=splice -o "$WORK/trace" "$RATELIMIT" -l --rate 1G | cat >/dev/null
! grep -q 'splice(' "$WORK/trace" || fail "spliced in line mode"

# A slow consumer: nothing is lost while it lags behind.
"$RATELIMIT" --rate 10M "$WORK/a" | (sleep 0.5; cat) >"$WORK/out"
cmp "$WORK/a" "$WORK/out" || fail "slow consumer"
