#!/usr/bin/env bash
# --help, --version and malformed command lines.
source "$E2E_LIB"

expect_status 0 "$RATELIMIT" --help
grep -q 'Usage:' <<<"$("$RATELIMIT" --help)" || fail "--help prints no usage"

version=$("$RATELIMIT" --version)
[[ $version =~ ^ratelimit\ [0-9]+\.[0-9]+\.[0-9]+\ \(fmt\ [0-9.]+,\ CLI11\ [0-9.]+\)$ ]] ||
  fail "unexpected --version output: $version"

expect_status 64 "$RATELIMIT" --no-such-option
grep -q -- '--no-such-option' "$WORK/stderr" || fail "the error does not name the bad option"
[ "$(wc -l <"$WORK/stderr")" -eq 1 ] || fail "the error is not one line"
grep -q '^ratelimit: ' "$WORK/stderr" || fail "the error does not start with 'ratelimit: '"
