#!/usr/bin/env bash
# The man page's rule for the state directory: a system call that fails in it (read-only, no
# space or inodes) is 69, the store unavailable; what is there and should not be (another user's
# directory, anything but a regular file at KEY.bucket) is 77, unsafe. Whatever the command.
source "$E2E_LIB"

# Root writes anywhere: the permission checks run as nobody.
as_user=()
if [ "$(id -u)" -eq 0 ]; then
  chmod 755 "$WORK"
  as_user=(setpriv --reuid=nobody --regid=nogroup --clear-groups)
fi

# A read-only state directory: the bucket exists, but no command can change it.
mkdir -m 700 "$WORK/readonly"
[ "${#as_user[@]}" -eq 0 ] || chown nobody:nogroup "$WORK/readonly"
"${as_user[@]}" "$RATELIMIT" acquire --rate 5 --key k --state-dir "$WORK/readonly" ||
  fail "acquire in a writable directory failed"
chmod 500 "$WORK/readonly"
for command in "reset --key k" "set --key k --rate 6" "acquire --rate 5 --key k"; do
  # shellcheck disable=SC2086 # the command's words
  expect_status 69 "${as_user[@]}" "$RATELIMIT" $command --state-dir "$WORK/readonly"
  grep -q "^ratelimit: state directory '$WORK/readonly': .*Permission denied$" "$WORK/stderr" ||
    fail "$command: $(cat "$WORK/stderr")"
done
# Writable again, or a user who is not root could not remove it at the end.
chmod 700 "$WORK/readonly"

# Another user's directory at the state directory's path, one we may not even enter.
if [ "${#as_user[@]}" -gt 0 ]; then
  mkdir -m 700 "$WORK/roots"
  for command in "acquire --rate 5 --key k" "reset --key k" "status"; do
    # shellcheck disable=SC2086
    expect_status 77 "${as_user[@]}" "$RATELIMIT" $command --state-dir "$WORK/roots"
    expect_stderr "ratelimit: state directory '$WORK/roots' belongs to uid 0, not to you (uid $(id -u nobody))"
  done
else
  skip_part "another user's state directory (77): needs root, to run as nobody"
fi

# Anything but a regular file at KEY.bucket: 77, a directory as a FIFO.
mkdir -m 700 "$WORK/state"
mkdir "$WORK/state/dir.bucket"
mkfifo -m 600 "$WORK/state/fifo.bucket"
for key in dir fifo; do
  for command in "acquire --rate 5" "set --rate 6" "exec --rate 5 -- true"; do
    # shellcheck disable=SC2086
    expect_status 77 "$RATELIMIT" ${command%% *} --key "$key" --state-dir "$WORK/state" ${command#* }
    expect_stderr "ratelimit: state file '$WORK/state/$key.bucket' is not a regular file"
  done
done

# A slot file that cannot be created (no inode left): 69, the command not run.
if unshare -m true 2>/dev/null; then
  mkdir "$WORK/full"
  expect_status 69 unshare -m sh -c 'mount -t tmpfs -o size=64k,nr_inodes=1,mode=0700 tmpfs "$1" &&
    exec "$2" exec --rate 5 --key k --max-inflight 1 --state-dir "$1" -- touch "$3"' \
    sh "$WORK/full" "$RATELIMIT" "$WORK/ran"
  grep -q "^ratelimit: state directory '$WORK/full': .*No space left on device$" "$WORK/stderr" ||
    fail "no inode for a slot: $(cat "$WORK/stderr")"
  [ ! -e "$WORK/ran" ] || fail "the command ran without its slot"
else
  skip_part "a slot file with no inode left (69): unshare -m refused (needs root)"
fi
end_test
