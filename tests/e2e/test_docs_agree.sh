#!/usr/bin/env bash
# --help, the man page and the completions name the same options; the man page is lint-clean.
source "$E2E_LIB"
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
man_page=$root/man/ratelimit.1
completions=$root/scripts/completions
commands=("" set exec acquire status reset throttle)

# The options a command's --help declares: the first field of each option line.
help_options() {
  "$RATELIMIT" $1 --help | grep -E '^  +-' | awk '{print $1}' | sed 's/\[=[a-z|]*\]//' | tr ',' '\n' |
    sort -u
}

# The options the man page describes: the tag lines of its OPTIONS section.
man_options() {
  sed -n '/^\.SH OPTIONS/,/^\.SH /p' "$man_page" | grep -A1 '^\.TP' | grep -v -e '^\.TP' -e '^--' |
    sed 's/\\-/-/g' | grep -oE '(^|[ "])--?[a-zA-Z0-9][a-z0-9-]*' | tr -d ' "' | sort -u
}

# What the bash completion offers after `ratelimit [COMMAND] -`.
bash_completion_options() {
  bash -c '
    source /usr/share/bash-completion/bash_completion
    source "$1"
    shift
    COMP_WORDS=(ratelimit "$@" -)
    COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
    COMP_LINE="${COMP_WORDS[*]}"
    COMP_POINT=${#COMP_LINE}
    _ratelimit
    printf "%s\n" "${COMPREPLY[@]}"' _ "$completions/ratelimit.bash" $1 | grep -v = | sort -u
}

all_help=$(for command in "${commands[@]}"; do help_options "$command"; done | sort -u)
diff <(echo "$all_help") <(man_options) >"$WORK/diff" ||
  fail "--help (<) and the man page's OPTIONS (>) differ: $(cat "$WORK/diff")"

# Every subcommand --help lists has a SYNOPSIS line in the man page, and no other does.
help_subcommands=$("$RATELIMIT" --help | sed -n '/^Subcommands:/,/^$/p' | awk 'NF > 1 {print $1}' |
  sort)
man_subcommands=$(sed -n '/^\.SH SYNOPSIS/,/^\.SH /p' "$man_page" | sed -n 's/^\.B ratelimit \([a-z]*\)$/\1/p' |
  sort)
[ "$help_subcommands" = "$man_subcommands" ] ||
  fail "subcommands in --help ($(echo $help_subcommands)) and in SYNOPSIS ($(echo $man_subcommands)) differ"

for command in "${commands[@]}"; do
  diff <(help_options "$command") <(bash_completion_options "$command") >"$WORK/diff" ||
    fail "'ratelimit $command --help' (<) and the bash completion (>) differ: $(cat "$WORK/diff")"
done

mkdir "$WORK/empty"
subcommands=$(cd "$WORK/empty" && bash -c '
  source /usr/share/bash-completion/bash_completion
  source "$1"
  COMP_WORDS=(ratelimit "")
  COMP_CWORD=1
  _ratelimit
  printf "%s\n" "${COMPREPLY[@]}"' _ "$completions/ratelimit.bash" | sort | tr '\n' ' ')
[ "$subcommands" = "acquire exec reset set status throttle " ] ||
  fail "the bash completion offers '$subcommands' as subcommands"

# After exec's command word (with or without --), bash completes that command, not ratelimit.
# The command "probe" has a completion of its own that echoes the word it was asked to complete,
# so the test does not depend on the completions another package ships.
complete_line() {
  bash -c '
    source /usr/share/bash-completion/bash_completion
    source "$1"
    shift
    _probe() { COMPREPLY=("probe:$2"); }
    complete -F _probe probe
    COMP_WORDS=(ratelimit "$@")
    COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
    COMP_LINE="${COMP_WORDS[*]}"
    COMP_POINT=${#COMP_LINE}
    _ratelimit
    printf "%s\n" "${COMPREPLY[@]}"' _ "$completions/ratelimit.bash" "$@" 2>/dev/null
}
# expect_completion EXPECTED WORD...: completing the line "ratelimit WORD..." offers EXPECTED.
expect_completion() {
  local expected=$1 offered
  shift
  offered=$(complete_line "$@")
  grep -qx -- "$expected" <<<"$offered" || fail "'ratelimit $*' completes to '$offered', not '$expected'"
}
expect_completion echo exec --rate 2 ech
expect_completion echo exec --key api -- ech
expect_completion probe:--al exec --rate 2 probe --al
expect_completion probe:x exec --burst 3 -- probe a x
expect_completion --key exec --rate 2 --ke

# The same in fish, which runs the completion for real. "probe" has options and arguments of
# its own; none of ratelimit's may be offered for it.
fish_completes() {
  fish --no-config -c '
    source $argv[1]
    complete -c probe -l alpha
    complete -c probe -x -a "first second"
    complete -C $argv[2] | string replace -r "\t.*" ""
    true' "$completions/ratelimit.fish" "$1"
}
# expect_fish LINE EXPECTED: completing LINE offers EXPECTED (with "!": does not offer it).
expect_fish() {
  local offered
  offered=$(fish_completes "$1")
  if [[ $2 == !* ]]; then
    ! grep -qx -- "${2#!}" <<<"$offered" || fail "fish offers '${2#!}' for '$1'"
  else
    grep -qx -- "$2" <<<"$offered" || fail "fish offers '$offered' for '$1', not '$2'"
  fi
}
expect_fish "ratelimit exec --rate 2 ech" echo
expect_fish "ratelimit exec --key api -- ech" echo
expect_fish "ratelimit exec --rate 2 probe --al" --alpha
expect_fish "ratelimit exec --rate 2 probe --ra" '!--rate'
expect_fish "ratelimit exec --burst 3 -- probe a fi" first
expect_fish "ratelimit exec --rate 2 --ke" --key
expect_fish "ratelimit --ra" --rate
expect_fish "ratelimit ac" acquire

for option in $all_help; do
  long=${option#--}
  if [[ $option == --* ]]; then
    grep -qE -- "(^|[^a-z-])$option([^a-z-]|\$)" "$completions/_ratelimit" ||
      fail "the zsh completion lacks $option"
    grep -qE -- "-l $long( |\$)" "$completions/ratelimit.fish" ||
      fail "the fish completion lacks $option"
  fi
done

# Every ratelimit command line that README, docs/ and the man page show parses: run with no
# input, no command on PATH and a private state directory, it may fail for a missing file (66), a
# command not found (127) or a pipe that is not running, but never as a malformed command line (64).
documented_commands() {
  sed -n '/^```sh/,/^```/p' "$root/README.md" "$root"/docs/*.md
  sed -n '/^\.EX/,/^\.EE/p' "$man_page" | sed 's/\\-/-/g'
}
mkdir "$WORK/no-commands" "$WORK/examples"
# timeout and bash by their paths: the empty PATH is for the command lines, and a timeout not
# found would make every line exit 127 and pass.
timeout_path=$(command -v timeout)
bash_path=$(command -v bash)
while IFS= read -r command; do
  status=0
  (cd "$WORK/examples" && RATELIMIT_STATE_DIR=$WORK/examples-state PATH=$WORK/no-commands \
    "$timeout_path" 5 "$bash_path" -c "ratelimit() { \"\$RATELIMIT\" \"\$@\"; }; $command" \
    </dev/null >/dev/null 2>"$WORK/stderr") || status=$?
  if [ "$status" -eq 64 ]; then
    fail "the documented '$command' does not parse: $(cat "$WORK/stderr")"
  fi
  [ "$status" -ne 124 ] || fail "the documented '$command' did not end within 5 s"
  echo "$command" >>"$WORK/examples-run"
# A command line continued with a backslash is read whole; it ends before a pipe, a list, a
# comment or a redirection (the 2 of 2>/dev/null left out). The placeholder PID becomes a number:
# no pipe of that process runs in the private state directory.
done < <(documented_commands | sed -e ':a' -e '/\\$/{N;s/\\\n *//;ba' -e '}' |
  grep -oE 'ratelimit( [^|;&<>#]*[^|;&<># ])?' | sed -E -e 's/ [0-9]$//' -e 's/ PID( |$)/ 4242\1/' |
  grep -E '^ratelimit [a-z-]' |
  tr -d '[]' | sort -u)
[ "$(wc -l <"$WORK/examples-run")" -ge 10 ] || fail "only $(wc -l <"$WORK/examples-run") documented commands found"

groff -man -ww -z "$man_page" 2>"$WORK/groff" && [ ! -s "$WORK/groff" ] ||
  fail "groff -ww: $(cat "$WORK/groff")"
mandoc -Tlint "$man_page" >"$WORK/mandoc" 2>&1 || fail "mandoc -Tlint: $(cat "$WORK/mandoc")"
