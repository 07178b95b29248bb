#!/usr/bin/env bash
# Descriptors that another process made non-blocking (O_NONBLOCK belongs to the open pipe, shared
# with everyone holding it, as a Node.js program leaves its stdout) report EAGAIN instead of
# waiting. ratelimit waits for them itself and still moves every byte, on both paths.
# shellcheck disable=SC2002 # cat into ratelimit: its input must be a pipe
# Timing: loose bounds, run alone (RESOURCE_LOCK timing).
source "$E2E_LIB"

random_file "$WORK/in" 2000000

# nonblocking CMD...: runs CMD with its standard input and output set O_NONBLOCK.
nonblocking() {
  perl -MFcntl -e '
    for my $handle (\*STDIN, \*STDOUT) {
      my $flags = fcntl($handle, F_GETFL, 0) or die "F_GETFL: $!";
      fcntl($handle, F_SETFL, $flags | O_NONBLOCK) or die "F_SETFL: $!";
    }
    exec { $ARGV[0] } @ARGV or die "exec: $!";' "$@"
}

# The consumer starts late, so writes find the output full; the producer starts a little late, so
# the input is empty at first. strace shows that EAGAIN really came back from the output, so the
# test cannot pass vacuously (reads and splices wait for poll to report input first).
# expect_eagain SYSCALL: some SYSCALL in the trace returned EAGAIN.
expect_eagain() {
  grep -q "^[0-9]* *$1(.*EAGAIN" "$WORK/trace" || fail "mode '$mode': no $1 returned EAGAIN"
}
for mode in "" -l; do
  { sleep 0.1; cat "$WORK/in"; } |
    nonblocking strace -f -e trace=read,write,splice -o "$WORK/trace" "$RATELIMIT" $mode --rate 20M |
    { sleep 0.6; cat; } >"$WORK/out"
  cmp "$WORK/in" "$WORK/out" || fail "non-blocking descriptors, mode '$mode': output differs"
  if [ -z "$mode" ]; then
    expect_eagain splice
  else
    expect_eagain write
  fi
done
