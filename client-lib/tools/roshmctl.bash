# bash completion for roshmctl (installed to
# $datadir/bash-completion/completions/roshmctl)
_roshmctl()
{
	local cur prev words cword
	cur=${COMP_WORDS[COMP_CWORD]}
	prev=${COMP_WORDS[COMP_CWORD-1]}
	case $prev in
	-s|--socket|--token-file|--admin-token-file)
		COMPREPLY=($(compgen -f -- "$cur"))
		return ;;
	--as|-T|--tenant|-R|--region|--pod)
		COMPREPLY=()
		return ;;
	esac
	local cmd="" w
	for w in "${COMP_WORDS[@]:1:COMP_CWORD-1}"; do
		case $w in
		status|clients|regions|peers|drain|stats) cmd=$w ;;
		esac
	done
	if [[ $cur == -* ]]; then
		local opts="-s --socket -j --json --admin-token-file --as --token-file --help --version"
		[[ $cmd == drain ]] && opts+=" --tenant --region --pod"
		COMPREPLY=($(compgen -W "$opts" -- "$cur"))
	elif [[ -z $cmd ]]; then
		COMPREPLY=($(compgen -W "status clients regions peers drain stats" -- "$cur"))
	fi
}
complete -F _roshmctl roshmctl
