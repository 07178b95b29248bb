#!/usr/bin/env bash
# Without XDG_RUNTIME_DIR (cron, su), another local user who makes /tmp/ratelimit-UID first (a
# directory, a file, a FIFO, a symbolic link, a socket) does not lock the victim out: the state
# directory is one no other user can take, /run/user/UID/ratelimit when that directory is the
# victim's, else under the victim's home. Needs root, to act as two throwaway users; skipped
# otherwise.
source "$E2E_LIB"
[ "$(id -u)" -eq 0 ] || skip "needs root to run as two other users"
command -v setpriv >/dev/null || skip "needs setpriv"
[ -x /usr/bin/python3 ] || skip "needs /usr/bin/python3 (to make a socket)"

# Two uids no account has, and no runtime directory yet.
victim=$((61000 + RANDOM % 2000))
attacker=$((victim + 2000))
! getent passwd "$victim" "$attacker" >/dev/null || skip "uids $victim, $attacker are taken"
[ ! -e "/run/user/$victim" ] || skip "/run/user/$victim exists"
planted=/tmp/ratelimit-$victim
[ ! -e "$planted" ] && [ ! -L "$planted" ] || skip "$planted exists"
trap 'rm -rf "$WORK" "$planted"; rm -rf "/run/user/$victim"' EXIT
chmod 711 "$WORK"
home=$WORK/home
mkdir "$home"
chown "$victim:$victim" "$home"

as_user() {
  local uid=$1
  shift
  setpriv --reuid="$uid" --regid="$uid" --clear-groups "$@"
}
# The victim's acquire as cron runs it: no XDG_RUNTIME_DIR, no RATELIMIT_STATE_DIR.
victim_acquire() {
  as_user "$victim" env -u XDG_RUNTIME_DIR -u RATELIMIT_STATE_DIR -u XDG_STATE_HOME HOME="$home" \
    "$RATELIMIT" acquire --rate 1000/s --key k
}

plant() {
  case $1 in
    directory) as_user "$attacker" mkdir -m 777 "$planted" ;;
    file) as_user "$attacker" touch "$planted" ;;
    fifo) as_user "$attacker" mkfifo "$planted" ;;
    link) as_user "$attacker" ln -s /tmp "$planted" ;;
    socket)
      # The system's python: one in root's home (pyenv) is not the attacker's to run.
      as_user "$attacker" /usr/bin/python3 -c 'import socket, sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])' \
        "$planted"
      ;;
  esac
}

for kind in directory file fifo link socket; do
  plant "$kind"
  expect_status 0 victim_acquire
  [ -f "$home/.local/state/ratelimit/k.bucket" ] ||
    fail "with a $kind planted at $planted, no bucket in the home's state directory"
  [ "$(stat -c %a "$home/.local" "$home/.local/state" "$home/.local/state/ratelimit" | sort -u)" = 700 ] ||
    fail "the state directory and its parents are not 0700"
  rm -rf "$planted" "$home/.local"
done

# The runtime directory, when it is the victim's, comes first; one of another user does not count.
mkdir -p "/run/user/$victim"
chown "$attacker" "/run/user/$victim"
expect_status 0 victim_acquire
[ -f "$home/.local/state/ratelimit/k.bucket" ] || fail "another user's /run/user/UID was used"
chown "$victim" "/run/user/$victim"
chmod 700 "/run/user/$victim"
expect_status 0 victim_acquire
[ -f "/run/user/$victim/ratelimit/k.bucket" ] || fail "/run/user/$victim/ratelimit was not used"
