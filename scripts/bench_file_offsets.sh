#!/usr/bin/env bash
# bench_file_offsets.sh BASELINE NEW [ROUNDS]: the CPU of ratelimit's buffered path (file inputs,
# read ahead with pread, standard input's offset moved per chunk) and of its splice path, two builds
# side by side: user+sys seconds of ratelimit alone (/usr/bin/time) at unthrottled rates, where a
# system call more per write would show most. Rounds (default 9) alternate the builds' order;
# prints "case build seconds" per run, then each case's median. Results: bench/results/file_offsets.md.
set -euo pipefail
base=$(realpath "$1") new=$(realpath "$2") rounds=${3:-9}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
head -c 1073741824 /dev/zero | tr '\0' x >bytes.bin # 1 GiB
seq 20000000 >lines.txt                             # 169 MB
tmp=$work/time
# cpu COMMAND...: runs it; its user+sys seconds go to descriptor 3.
cpu() { /usr/bin/time -f "%U %S" -o "$tmp" "$@"; awk '{ printf "%.3f", $1 + $2 }' "$tmp" >&3; }
for round in $(seq "$rounds"); do
  builds=("base $base" "new $new")
  [ $((round % 2)) -eq 0 ] && builds=("new $new" "base $base")
  for entry in "${builds[@]}"; do
    name=${entry%% *} r=${entry#* }
    echo "file-bytes $name $( { cpu "$r" --rate 100G <bytes.bin >/dev/null; } 3>&1)"
    echo "file-lines $name $( { cpu "$r" -l --rate 1G <lines.txt >/dev/null; } 3>&1)"
    echo "file-lines-to-pipe $name $( { cpu "$r" -l --rate 1G <lines.txt | cat >/dev/null; } 3>&1)"
    echo "pipe-splice $name $( { cat bytes.bin | cpu "$r" --rate 100G | cat >/dev/null; } 3>&1)"
  done
done | tee runs.txt
sort -k1,2 -k3n runs.txt | awk '{ k = $1 " " $2; v[k] = v[k] " " $3; n[k]++ }
  END { for (k in v) { split(substr(v[k], 2), s, " "); print k, "median", s[int((n[k] + 1) / 2)] } }' |
  sort
