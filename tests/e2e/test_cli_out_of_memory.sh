#!/usr/bin/env bash
# Out of memory anywhere, even while the options are declared, ends with one line and exit 70,
# never with abort's 134. Under `ulimit -v` a band of limits lets the binary start but not declare
# its options; the band moves with the binary's size, so the limits are scanned. (Below the band
# the loader itself fails, before any code of ratelimit runs.)
source "$E2E_LIB"

out_of_memory_seen=0
for limit in $(seq 2000 20 32000); do
  # The shell's own report of a crash below the band goes to /dev/null.
  status=$( (ulimit -v "$limit" && exec "$RATELIMIT" --version) >/dev/null 2>"$WORK/stderr"
    echo $?) 2>/dev/null
  [ "$status" -ne 134 ] || fail "ulimit -v $limit: aborted (134): $(cat "$WORK/stderr")"
  if [ "$status" -eq 70 ]; then
    expect_stderr "ratelimit: out of memory"
    out_of_memory_seen=1
  fi
done
[ "$out_of_memory_seen" -eq 1 ] || fail "test premise: no limit from 2000 to 32000 KiB ran out of memory"
