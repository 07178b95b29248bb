#!/usr/bin/env bash
# The README's examples marked runnable work as a reader pastes them: each ```sh block after a
# line `<!-- runnable -->` runs in an empty directory with `ratelimit` on PATH, exits 0 and
# writes nothing to stderr; if a ```text block after a line `<!-- output -->` follows it, the
# block's output is that text. An example whose output depends on timing is marked
# `<!-- runnable, at least N lines of output -->` instead. Each runs twice on the same state
# directory (readers run an example again), once with sh and once with bash.
source "$E2E_LIB"
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
readme=$root/README.md

# Splits the marked blocks out of the README: N.sh, N.line (its line in the README) and, when
# the README shows its output, N.expected, or N.least, the fewest lines of output it expects.
mkdir "$WORK/blocks"
awk -v dir="$WORK/blocks" '
  function fail(message) {
    print "README.md:" NR ": " message > "/dev/stderr"
    failed = 1
    exit 1
  }
  state == "code" {
    if ($0 == "```") state = "after"
    else print > (dir "/" n ".sh")
    next
  }
  state == "output" {
    if ($0 == "```") state = ""
    else print > (dir "/" n ".expected")
    next
  }
  state == "want code" || state == "want output" {
    if ($0 == "") next
    if (state == "want code" && $0 == "```sh") {
      state = "code"
      print NR > (dir "/" n ".line")
      printf "" > (dir "/" n ".sh")
      next
    }
    if (state == "want output" && $0 == "```text") {
      state = "output"
      printf "" > (dir "/" n ".expected")
      next
    }
    fail("a marker not followed by a " (state == "want code" ? "```sh" : "```text") " block")
  }
  state == "after" {
    if ($0 == "") next
    state = ""
    if ($0 == "<!-- output -->") {
      state = "want output"
      next
    }
  }
  $0 ~ /^<!-- runnable(, at least [0-9]+ lines of output)? -->$/ {
    n++
    state = "want code"
    if (split($0, words, " ") == 9) print words[5] > (dir "/" n ".least")
  }
  $0 == "<!-- output -->" { fail("an output marker after no runnable block") }
  END {
    if (!failed && state != "" && state != "after") fail("a marked block does not end")
  }
' "$readme" || fail "the README's runnable blocks cannot be read"

blocks=$(find "$WORK/blocks" -name '*.sh' | wc -l)
[ "$blocks" -ge 3 ] || fail "only $blocks blocks of the README are marked runnable"

mkdir "$WORK/bin"
ln -s "$RATELIMIT" "$WORK/bin/ratelimit"
for script in "$WORK"/blocks/*.sh; do
  block=${script%.sh}
  where="the README's runnable block at line $(cat "$block.line")"
  state_dir=$WORK/state-$(basename "$block")
  for shell in sh bash; do
    run_dir=$(mktemp -d "$WORK/run.XXXXXX")
    status=0
    (cd "$run_dir" && PATH=$WORK/bin:$PATH RATELIMIT_STATE_DIR=$state_dir \
      timeout 60 "$shell" "$script" </dev/null >"$WORK/stdout" 2>"$WORK/stderr") || status=$?
    [ "$status" -eq 0 ] || fail "$where exited $status under $shell: $(cat "$WORK/stderr")"
    [ ! -s "$WORK/stderr" ] || fail "$where wrote to stderr under $shell: $(cat "$WORK/stderr")"
    if [ -f "$block.expected" ]; then
      diff "$block.expected" "$WORK/stdout" >"$WORK/diff" ||
        fail "$where printed other than the README shows (<), under $shell: $(cat "$WORK/diff")"
    fi
    if [ -f "$block.least" ]; then
      [ "$(wc -l <"$WORK/stdout")" -ge "$(cat "$block.least")" ] ||
        fail "$where printed fewer than $(cat "$block.least") lines under $shell: $(cat "$WORK/stdout")"
    fi
  done
done
