#!/usr/bin/env bash
# A refused turn never sends more than was granted from an input that cannot be spliced or read
# back (issue 39): standard input a socket, the output a file. --stop-at-quota and --timeout end
# the pipe with exit 75 and one line; what is written is exactly the chunks granted, and the rest
# is still in the socket for its next reader, byte-exact. With --key on the state file too.
# An input at its end whose every byte went out ends with exit 0, though the quota is spent or the
# next turn is further than --timeout: its end is seen before a turn is asked for, from a socket
# and from a terminal alike.
# Timing: a turn 1 s away against --timeout 500ms, with loose margins (RESOURCE_LOCK timing).
source "$E2E_LIB"
export RATELIMIT_STATE_DIR=$WORK/state
cd "$WORK"
random_file data 10000

# from_socket ARGS...: runs ratelimit ARGS with standard input one end of a socket pair into whose
# other end `data` was written (and shut); its output in `out`, its stderr in $WORK/stderr, what
# it left in the socket in `rest`; prints its exit status.
from_socket() {
  python3 - "$RATELIMIT" "$@" <<'EOF'
import socket, subprocess, sys
ours, theirs = socket.socketpair()
with open("data", "rb") as data:
    ours.sendall(data.read())
ours.shutdown(socket.SHUT_WR)
with open("out", "wb") as out, open("stderr", "wb") as err:
    status = subprocess.run(sys.argv[1:], stdin=theirs, stdout=out, stderr=err).returncode
rest = b""
while chunk := theirs.recv(65536):
    rest += chunk
with open("rest", "wb") as kept:
    kept.write(rest)
print(status)
EOF
}

# expect_split WRITTEN: `out` is the first WRITTEN bytes of `data`, `rest` all the others.
expect_split() {
  cmp -s out <(head -c "$1" data) || fail "wrote $(wc -c <out) bytes, expected the first $1"
  cmp -s rest <(tail -c +$(($1 + 1)) data) || fail "left $(wc -c <rest) bytes in the socket, expected $((10000 - $1))"
}

# A quota of 2500 an hour in chunks of 1000: two go, the third's turn is refused and not read.
[ "$(from_socket --rate 100k --chunk 1000 --quota 2500/h --stop-at-quota)" = 75 ] ||
  fail "--stop-at-quota did not exit 75: $(cat stderr)"
[[ $(cat stderr) =~ ^"ratelimit: stopped: a quota is spent for "[0-9hms]+" more; 2000 bytes written, the rest left unread"$ ]] ||
  fail "--stop-at-quota said: $(cat stderr)"
expect_split 2000

# The same on a key.
[ "$(from_socket --rate 100k --chunk 1000 --quota 2500/h --stop-at-quota --key q)" = 75 ] ||
  fail "--stop-at-quota --key did not exit 75: $(cat stderr)"
[[ $(cat stderr) =~ "; 2000 bytes written, the rest left unread"$ ]] || fail "--stop-at-quota --key said: $(cat stderr)"
expect_split 2000

# --timeout: the first chunk is free, the second's turn a second away.
[ "$(from_socket --rate 1000 --chunk 1000 --timeout 500ms)" = 75 ] ||
  fail "--timeout did not exit 75: $(cat stderr)"
expect_stderr "ratelimit: stopped: the next turn was 1s away, longer than --timeout 500ms; 1000 bytes written, the rest left unread"
expect_split 1000

# At its end when the quota is spent: all 2000 bytes went out, and the end is no refused turn.
head -c 2000 data >all
cp all data
[ "$(from_socket --rate 100k --chunk 1000 --quota 2000/h --stop-at-quota)" = 0 ] ||
  fail "--stop-at-quota at the socket's end did not exit 0: $(cat stderr)"
cmp -s out all || fail "wrote $(wc -c <out) bytes of 2000 at the socket's end"
[ ! -s stderr ] || fail "--stop-at-quota at the socket's end said: $(cat stderr)"
[ "$(from_socket --rate 100k --chunk 1000 --quota 2500/h --stop-at-quota --key end)" = 0 ] ||
  fail "--stop-at-quota --key at the socket's end did not exit 0: $(cat stderr)"
cmp -s out all || fail "wrote $(wc -c <out) bytes of 2000 at the socket's end, with --key"
# --timeout: one chunk, the first, is all there is; the turn after it is a second away.
head -c 1000 all >data
[ "$(from_socket --rate 1000 --chunk 1000 --timeout 500ms)" = 0 ] ||
  fail "--timeout at the socket's end did not exit 0: $(cat stderr)"
cmp -s out data || fail "wrote $(wc -c <out) bytes of 1000 at the socket's end, with --timeout"

# A terminal at its end (a line, then the end-of-file key) under a quota that its line spends.
python3 -c 'import sys; sys.stdout.write("a" * 99 + "\n")' >line
[ "$(python3 - "$RATELIMIT" --rate 100k --chunk 100 --quota 100/h --stop-at-quota <<'EOF'
import os, pty, subprocess, sys
ours, theirs = pty.openpty()
os.write(ours, b"a" * 99 + b"\n\x04")
with open("out", "wb") as out, open("stderr", "wb") as err:
    print(subprocess.run(sys.argv[1:], stdin=theirs, stdout=out, stderr=err).returncode)
EOF
)" = 0 ] || fail "--stop-at-quota at the terminal's end did not exit 0: $(cat stderr)"
cmp -s out line || fail "the terminal's line did not go out whole"
