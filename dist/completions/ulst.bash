# bash completion for ulst, ulnet's lst                             -*- shell-script -*-
#
# Install: /usr/share/bash-completion/completions/ulst (or `source` this file).
# For each command, its long options (and for add_test, the test words). The ulnetd tests
# (crates/ulnetd/tests/daemon/dist.rs) check it against `ulst --list-commands` and each
# command's usage (`ulst help COMMAND`): a command added to ulst must be added here.

declare -gA _ulst_words=(
    ["ulst"]="--nid --port --socket --config --json --list-commands --version help new_session end_session show_session ping add_group del_group update_group list_group stat show_error add_batch run stop list_batch query add_test"
    ["ulst new_session"]="--timeout --force"
    ["ulst end_session"]=""
    ["ulst show_session"]=""
    ["ulst ping"]="--session --server --batch --group --nodes --timeout"
    ["ulst add_group"]=""
    ["ulst del_group"]=""
    ["ulst update_group"]="--refresh --clean --remove"
    ["ulst list_group"]="--active --busy --down --unknown --all"
    ["ulst stat"]="--timeout --delay --count --lnet --rpc --bw --rate --read --write --avg --min --max --mbs --json"
    ["ulst show_error"]="--session --json"
    ["ulst add_batch"]=""
    ["ulst run"]="--timeout"
    ["ulst stop"]="--force"
    ["ulst list_batch"]="--test --invalid --active --all --server"
    ["ulst query"]="--timeout --delay --loop --test --server --active --idle --error --all --json"
    ["ulst add_test"]="--batch --concurrency --distribute --from --to --loop ping brw read write size= check=simple check=full off="
)

_ulst() {
    local cur=${COMP_WORDS[COMP_CWORD]} path=ulst word i
    COMPREPLY=()
    # The command is the first word that names one; options before it are ulst's own.
    for ((i = 1; i < COMP_CWORD; i++)); do
        word=${COMP_WORDS[i]}
        if [[ $path == ulst && -n ${_ulst_words["ulst $word"]+set} ]]; then
            path="ulst $word"
        fi
    done
    local wanted=() candidate
    for candidate in ${_ulst_words[$path]}; do
        if [[ $cur == -* ]]; then
            [[ $candidate == -* ]] && wanted+=("$candidate")
        else
            [[ $candidate != -* ]] && wanted+=("$candidate")
        fi
    done
    compopt -o nospace 2>/dev/null
    COMPREPLY=($(compgen -W "${wanted[*]}" -- "$cur"))
    # A space after each word except `key=`.
    for i in "${!COMPREPLY[@]}"; do
        [[ ${COMPREPLY[i]} == *= ]] || COMPREPLY[i]+=" "
    done
}
complete -F _ulst ulst
