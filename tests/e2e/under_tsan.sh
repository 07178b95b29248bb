#!/usr/bin/env bash
# Runs one end-to-end test with every ratelimit process it starts writing ThreadSanitizer's reports
# to files, and fails if any report was written: the host agent is a daemon whose stderr and exit
# status nobody sees, so a race in its threads would otherwise pass unnoticed.
set -u
reports=$(mktemp -d)
TSAN_OPTIONS="log_path=$reports/report${TSAN_OPTIONS:+ $TSAN_OPTIONS}" bash "$1"
status=$?
if compgen -G "$reports/report.*" >/dev/null; then
  cat "$reports"/report.* >&2
  echo "FAIL: ThreadSanitizer reported a race or misuse (above)" >&2
  status=1
fi
rm -rf "$reports"
exit "$status"
