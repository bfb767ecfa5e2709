# bash completion for ulnetctl, ulnet's lnetctl                    -*- shell-script -*-
#
# Install: /usr/share/bash-completion/completions/ulnetctl (or `source` this file).
# The table lists, for each command path (the program name, then the command words), its
# subcommands and long options. The ulnetd tests (crates/ulnetd/tests/daemon/dist.rs) check
# it against `ulnetctl --list-commands` and each command's --help: a command added to
# ulnetctl must be added here.

declare -gA _ulnetctl_words=(
    ["ulnetctl"]="--socket --list-commands --version help lnet route net routing set import export stats debug global peer ping discover service-id udsp fault setup-mrrouting setup-sysctl cpt-of-nid list_nids which_nid conn_list get_param"
    ["ulnetctl lnet"]="configure unconfigure"
    ["ulnetctl lnet configure"]="--all --large"
    ["ulnetctl lnet unconfigure"]=""
    ["ulnetctl route"]="add del show"
    ["ulnetctl route add"]="--net --gateway --hop --hop-count --priority --health_sensitivity"
    ["ulnetctl route del"]="--net --gateway"
    ["ulnetctl route show"]="--net --gateway --hop --hop-count --priority --verbose"
    ["ulnetctl net"]="add del show set"
    ["ulnetctl net add"]="--net --if --nid --ip2net --peer-timeout --peer-credits --peer-buffer-credits --credits --cpt --conns-per-peer --skip-mr-route-setup --auth-key --traffic-class --tos"
    ["ulnetctl net del"]="--net --nid --if"
    ["ulnetctl net show"]="--net --verbose"
    ["ulnetctl net set"]="--nid --net --lnd-timeout --health --conns-per-peer --all"
    ["ulnetctl routing"]="show"
    ["ulnetctl routing show"]=""
    ["ulnetctl set"]="tiny_buffers small_buffers large_buffers routing numa_range max_interfaces discovery drop_asym_route retry_count transaction_timeout health_sensitivity recovery_interval router_sensitivity response_tracking recovery_limit max_recovery_ping_interval"
    ["ulnetctl set tiny_buffers"]=""
    ["ulnetctl set small_buffers"]=""
    ["ulnetctl set large_buffers"]=""
    ["ulnetctl set routing"]=""
    ["ulnetctl set numa_range"]=""
    ["ulnetctl set max_interfaces"]=""
    ["ulnetctl set discovery"]=""
    ["ulnetctl set drop_asym_route"]=""
    ["ulnetctl set retry_count"]=""
    ["ulnetctl set transaction_timeout"]=""
    ["ulnetctl set health_sensitivity"]=""
    ["ulnetctl set recovery_interval"]=""
    ["ulnetctl set router_sensitivity"]=""
    ["ulnetctl set response_tracking"]=""
    ["ulnetctl set recovery_limit"]=""
    ["ulnetctl set max_recovery_ping_interval"]=""
    ["ulnetctl import"]="--add --del --show --exec --old-api"
    ["ulnetctl export"]="--backup"
    ["ulnetctl stats"]="show reset"
    ["ulnetctl stats show"]=""
    ["ulnetctl stats reset"]=""
    ["ulnetctl debug"]="recovery peer nidlist"
    ["ulnetctl debug recovery"]="--local --peer"
    ["ulnetctl debug peer"]="--nid"
    ["ulnetctl debug nidlist"]=""
    ["ulnetctl global"]="show"
    ["ulnetctl global show"]=""
    ["ulnetctl peer"]="add del show list set"
    ["ulnetctl peer add"]="--prim_nid --nid --non_mr --ip2nets --lock_prim"
    ["ulnetctl peer del"]="--prim_nid --nid --ip2nets --force"
    ["ulnetctl peer show"]="--nid --verbose"
    ["ulnetctl peer list"]=""
    ["ulnetctl peer set"]="--nid --health --all --state"
    ["ulnetctl ping"]="--source --timeout"
    ["ulnetctl discover"]="--force"
    ["ulnetctl service-id"]=""
    ["ulnetctl udsp"]="add del show"
    ["ulnetctl udsp add"]="--src --dst --rte --priority --idx"
    ["ulnetctl udsp del"]="--all --idx"
    ["ulnetctl udsp show"]="--idx"
    ["ulnetctl fault"]="drop delay"
    ["ulnetctl fault drop"]="add del reset show"
    ["ulnetctl fault drop add"]="--source --dest --rate --interval --portal --message --health_error"
    ["ulnetctl fault drop del"]="--all --source --dest"
    ["ulnetctl fault drop reset"]=""
    ["ulnetctl fault drop show"]=""
    ["ulnetctl fault delay"]="add del reset show"
    ["ulnetctl fault delay add"]="--source --dest --rate --interval --portal --message --latency"
    ["ulnetctl fault delay del"]="--all --source --dest"
    ["ulnetctl fault delay reset"]=""
    ["ulnetctl fault delay show"]=""
    ["ulnetctl setup-mrrouting"]=""
    ["ulnetctl setup-sysctl"]=""
    ["ulnetctl cpt-of-nid"]=""
    ["ulnetctl list_nids"]="all"
    ["ulnetctl which_nid"]=""
    ["ulnetctl conn_list"]="--net"
    ["ulnetctl get_param"]="--no-name --only-name cpu_partition_table cpu_partition_distance"
)

# Options whose value is a file or a directory path.
_ulnetctl_file_options="--socket"

_ulnetctl() {
    local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}
    local path=ulnetctl word next i
    COMPREPLY=()
    # The deepest known command path among the words before the cursor; options and their
    # values are not commands and leave the path as it is.
    for ((i = 1; i < COMP_CWORD; i++)); do
        word=${COMP_WORDS[i]}
        [[ $word == -* ]] && continue
        next="$path $word"
        [[ -n ${_ulnetctl_words[$next]+set} ]] && path=$next
    done
    if [[ " $_ulnetctl_file_options " == *" $prev "* ]]; then
        COMPREPLY=($(compgen -f -- "$cur"))
        return
    fi
    local candidates=${_ulnetctl_words[$path]} wanted=() candidate
    for candidate in $candidates; do
        if [[ $cur == -* ]]; then
            [[ $candidate == -* ]] && wanted+=("$candidate")
        else
            [[ $candidate != -* ]] && wanted+=("$candidate")
        fi
    done
    COMPREPLY=($(compgen -W "${wanted[*]}" -- "$cur"))
    # import and export read and write YAML files.
    if [[ ($path == "ulnetctl import" || $path == "ulnetctl export") && $cur != -* ]]; then
        COMPREPLY+=($(compgen -f -- "$cur"))
    fi
}
complete -F _ulnetctl ulnetctl
