#!/usr/bin/env bash
# Any record the state file store writes, it reads: a key with the most quotas (8) or a timetable
# of 142 entries keeps its bound (1 of 20 `acquire --try` granted) and `status` reads it; a
# record that cannot be read is still one line and a fresh bucket.
source "$E2E_LIB"
state=(--state-dir "$WORK/state")

# try_twenty KEY OPTIONS...: how many of 20 `acquire --try` on KEY are granted.
try_twenty() {
  local key=$1
  shift
  granted_of 20 "$RATELIMIT" acquire "${state[@]}" --key "$key" --try "$@"
}

quotas=()
for i in $(seq 8); do quotas+=(--quota "$i/${i}h"); done
granted=$(try_twenty quotas "${quotas[@]}")
[ "$granted" -eq 1 ] || fail "8 quotas: $granted of 20 granted, expected 1"

# 142 entries of 28 bytes as the key keeps them: 3975 bytes, near the 4000 allowed. The rate
# (one permit in 810 s) grants the first request only.
entries=()
for day in Mon Tue Wed Thu Fri Sat Sun; do
  for hour in $(seq -w 0 19); do entries+=("$day-$hour:00,0.001234567890123"); done
done
entries+=("Mon-20:00,0.001234567890123" "Mon-21:00,0.001234567890123")
timetable=$(IFS=';'; echo "${entries[*]}")
[ "${#entries[@]}" -eq 142 ] && [ "${#timetable}" -eq 3975 ] || fail "the timetable is not as meant"
granted=$(try_twenty timetable --rate "$timetable")
[ "$granted" -eq 1 ] || fail "a timetable of 142 entries: $granted of 20 granted, expected 1"

"$RATELIMIT" status "${state[@]}" >"$WORK/status"
grep -q unusable "$WORK/status" && fail "status finds a record unusable: $(cat "$WORK/status")"
grep -q "^quotas: quota 8/8h: 1 used in the window" "$WORK/status" ||
  fail "status does not show the 8th quota: $(cat "$WORK/status")"
! grep -q "fresh bucket" "$WORK/granted_of.stderr" ||
  fail "a record was taken as damaged: $(cat "$WORK/granted_of.stderr")"

# Damaged, the largest record is still one line (under --verbose) and a fresh bucket.
file=$WORK/state/quotas.bucket
[ "$(stat -c %s "$file")" -gt 4096 ] || fail "the record of 8 quotas is not above 4096 bytes"
printf 'x' | dd of="$file" bs=1 seek=100 conv=notrunc status=none
expect_status 0 "$RATELIMIT" acquire "${state[@]}" --key quotas --try --verbose "${quotas[@]}"
expect_stderr "ratelimit: key 'quotas': bad checksum; starting a fresh bucket"
