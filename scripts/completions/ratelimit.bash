# bash completion for ratelimit
_ratelimit() {
  local cur prev words cword
  _init_completion || return

  local command="" command_index=0 i
  for ((i = 1; i < cword; i++)); do
    case ${words[i]} in
      set | exec | acquire | status | reset | throttle) command=${words[i]} command_index=$i; break ;;
    esac
  done

  local value_options=" --rate -r --quota --no-quota --burst --warmup --cold-factor --delimiter --chunk --key -k --permits \
--timeout --max-inflight --throttled-status --retry --retry-after --max-pause --size -s --output -o --state-dir --redis --redis-timeout --redis-failover-timeout --on-redis-error \
--redis-tls-ca --redis-tls-cert --redis-tls-key "
  # exec: from the command on (after -- or at its first word), complete as that command.
  if [[ $command == exec ]]; then
    for ((i = command_index + 1; i < cword; i++)); do
      case ${words[i]} in
        --) _command_offset $((i + 1)); return ;;
        -*) [[ $value_options == *" ${words[i]} "* ]] && ((i++)) ;;
        *) _command_offset "$i"; return ;;
      esac
    done
    # The word being typed is the command itself.
    if [[ $cur != -* && $value_options != *" $prev "* ]]; then
      _command_offset "$cword"
      return
    fi
  fi

  local rate_options="--rate -r --burst --warmup --cold-factor --start-full --pay-first --quota"
  local shared_options="--key -k --state-dir --verbose -v --redis --redis-timeout
                        --redis-failover-timeout --redis-tls-ca
                        --redis-tls-cert --redis-tls-key --redis-tls-insecure"
  local options
  case $command in
    "") options="$rate_options $shared_options --output -o --lines -l --null -0 --delimiter --chunk
                 --timeout --stop-at-quota --size -s --progress -p --stats --on-redis-error --no-agent --help -h --version -V" ;;
    set) options="$rate_options --no-quota --no-start-full --no-pay-first $shared_options --help -h --version -V" ;;
    exec) options="$rate_options $shared_options --permits --try --timeout --max-inflight
                   --throttled-status --retry --on-redis-error --no-agent --help -h --version -V" ;;
    acquire) options="$rate_options $shared_options --permits --try --timeout --on-redis-error
                      --no-agent --help -h --version -V" ;;
    status) options="$shared_options --json --help -h --version -V" ;;
    reset) options="$shared_options --help -h --version -V" ;;
    throttle) options="$shared_options --retry-after --max-pause --help -h --version -V" ;;
  esac

  case $prev in
    --output | -o | --redis-tls-ca | --redis-tls-cert | --redis-tls-key) _filedir; return ;;
    --state-dir) _filedir -d; return ;;
    --on-redis-error) COMPREPLY=($(compgen -W "fail allow local" -- "$cur")); return ;;
    --redis) COMPREPLY=($(compgen -W "redis:// rediss:// unix://" -- "$cur")); compopt -o nospace; return ;;
    --rate | -r | --burst | --warmup | --cold-factor | --delimiter | --chunk | --key | -k | \
      --permits | --timeout | --max-inflight | --throttled-status | --retry | --retry-after | --max-pause | --size | -s | --redis-timeout | --redis-failover-timeout) return ;;
  esac

  if [[ $cur == -* ]]; then
    COMPREPLY=($(compgen -W "$options" -- "$cur"))
    [[ $command == "" ]] && COMPREPLY+=($(compgen -W "--progress=force --stats=text --stats=json" -- "$cur"))
  elif [[ $command == "" ]]; then
    COMPREPLY=($(compgen -W "set exec acquire status reset throttle" -- "$cur"))
    _filedir
  elif [[ $command == set ]]; then
    COMPREPLY=($(compgen -W "$(pgrep -x ratelimit 2>/dev/null)" -- "$cur"))
  fi
}
complete -F _ratelimit ratelimit
