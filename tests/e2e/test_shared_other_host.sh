#!/usr/bin/env bash
# A state file written under another boot of this machine is a fresh bucket (the monotonic clock
# restarted); one written on another machine (a state directory on NFS or a shared home) is
# refused with exit 77, since taking it as fresh would leave callers alternating between the hosts
# unlimited.
source "$E2E_LIB"
export RATELIMIT_STATE_DIR=$WORK/state

# The record (version 6, state_file_format.cpp): magic 8, version and shape 4 + 4, four doubles,
# flags 4 and two int64s (52), then the machine id (32 bytes), the boot id (36), the timetable's
# entry (8) and length (4, here 0: no timetable), the number of quotas (4, here 0), the notation's
# length (4) and the notation, the checksum (the last 8).
readonly machine_at=68 boot_at=100

# rewrite FILE OFFSET TEXT: TEXT over the record's bytes at OFFSET, and the FNV-1a checksum
# recomputed (bash arithmetic wraps at 64 bits, as the checksum does).
rewrite() {
  local file=$1 offset=$2 text=$3 i hash checksum_at
  local -a bytes
  read -r -a bytes <<<"$(od -An -tu1 -v "$file" | tr -s ' \n' ' ')"
  checksum_at=$((${#bytes[@]} - 8))
  for ((i = 0; i < ${#text}; i++)); do
    bytes[offset + i]=$(printf '%d' "'${text:i:1}")
  done
  hash=$((0xcbf29ce484222325))
  for ((i = 0; i < checksum_at; i++)); do
    hash=$(((hash ^ bytes[i]) * 0x100000001b3))
  done
  for ((i = 0; i < 8; i++)); do
    bytes[checksum_at + i]=$(((hash >> (8 * i)) & 255))
  done
  for ((i = 0; i < ${#bytes[@]}; i++)); do printf "\\$(printf '%03o' "${bytes[i]}")"; done >"$file"
}

"$RATELIMIT" acquire --rate 1/m --key k
expect_status 75 "$RATELIMIT" acquire --rate 1/m --key k --try
# Unchanged but rewritten: the checksum is right, so the bucket is still busy.
rewrite "$WORK/state/k.bucket" 0 RLBUCKET
expect_status 75 "$RATELIMIT" acquire --rate 1/m --key k --try

# Another boot of this machine: a fresh bucket, and --verbose says why.
rewrite "$WORK/state/k.bucket" "$boot_at" 00000000-0000-0000-0000-000000000000
expect_status 0 "$RATELIMIT" acquire --rate 1/m --key k --try --verbose
expect_stderr "ratelimit: key 'k': state from a previous boot; starting a fresh bucket"
expect_status 75 "$RATELIMIT" acquire --rate 1/m --key k --try

# Another machine: refused by acquire, exec and a pipe alike, the record left as it was.
machine_id=$(cat /etc/machine-id 2>/dev/null || cat /var/lib/dbus/machine-id 2>/dev/null || true)
if [ -n "$machine_id" ]; then
  rewrite "$WORK/state/k.bucket" "$machine_at" ffffffffffffffffffffffffffffffff
  cp "$WORK/state/k.bucket" "$WORK/foreign"
  expect_status 77 "$RATELIMIT" acquire --rate 1/m --key k
  expect_stderr "ratelimit: state file '$WORK/state/k.bucket' was written on another machine (machine id ffffffffffffffffffffffffffffffff, this is $machine_id): a state directory shared by hosts cannot keep one limit; use a directory of this host's (--state-dir)"
  expect_status 77 "$RATELIMIT" exec --rate 1/m --key k -- touch "$WORK/ran"
  [ ! -e "$WORK/ran" ] || fail "exec ran its command on another machine's bucket"
  echo data | expect_status 77 "$RATELIMIT" --rate 1k --key k
  cmp -s "$WORK/foreign" "$WORK/state/k.bucket" || fail "another machine's record was changed"
  # reset clears it; the key starts afresh.
  expect_status 0 "$RATELIMIT" reset --key k
  expect_status 0 "$RATELIMIT" acquire --rate 1/m --key k --try
fi
