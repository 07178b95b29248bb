#!/usr/bin/env bash
# A pipe on a key books 36 ms of the rate at a time (pipes on a key take turns of one booking each,
# and shorter turns keep their shares even): 1 s of data at 100 kB/s makes about 28 bookings, three
# times the bookings, and so of the Redis commands, of the same pipe with --chunk 108ms (the
# default of a pipe without a key). Byte-exact.
source "$E2E_LIB"
source "$(dirname "${BASH_SOURCE[0]}")/redis_server.sh"
start_redis main
socket=$WORK/main/sock
random_file "$WORK/input" 100000

commands_so_far() {
  redis-cli -s "$socket" info stats | tr -d '\r' | sed -n 's/^total_commands_processed://p'
}

# commands_for ARGS...: the commands Redis processed while a pipe with ARGS copied the input.
commands_for() {
  local before after
  before=$(commands_so_far)
  "$RATELIMIT" --rate 100k --redis "unix://$socket" "$@" "$WORK/input" -o "$WORK/output" ||
    fail "the pipe with $* failed"
  cmp -s "$WORK/input" "$WORK/output" || fail "the pipe with $* changed its data"
  after=$(commands_so_far)
  # The INFO of `before` is counted too.
  echo $((after - before - 1))
}

# The same pipe with 108 ms chunks given: about a third of the bookings, and of the commands.
turns=$(commands_for --key turns)
sized=$(commands_for --key sized --chunk 108ms)
[ "$turns" -ge $((2 * sized)) ] ||
  fail "1 s at 100 kB/s on a key took $turns commands, with --chunk 108ms $sized:" \
    "expected at least twice as many (a booking per 36 ms, not per 108 ms)"
