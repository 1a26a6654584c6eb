#!/bin/bash
# The batch script of every pod the slurm provider of virtual-kubelet runs.
# Its text never changes: what the pod runs is read as data (NUL-separated
# lists) from the pod directory, never parsed as shell.
#
#   job.sh POD_DIR BWRAP
#
# POD_DIR/init and POD_DIR/main list the containers; each POD_DIR/c/NAME has
# argv, env (NAME=VALUE entries), mounts (source, destination, mode triples;
# mode ro, rw or tmpfs), root (the directory used as /) and workdir. Each
# container runs under bubblewrap; the script writes c/NAME/info (bwrap's
# child pid), c/NAME/log (stdout and stderr) and c/NAME/exit (the exit code),
# each exit file complete once it exists.
set -u
pod=$1
bwrap=$2
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

# put FILE VALUE: write atomically, so a reader never sees half a file.
put() { printf '%s\n' "$2" >"$1.tmp" && mv -f "$1.tmp" "$1"; }

# under DEST PATH: PATH is DEST or lies beneath it.
under() { [[ $2 == "$1" || $2 == "$1"/* ]]; }

# bindtree SRC AT: bind SRC's entries read-only at AT, descending instead
# into entries that hold a mount destination, so bubblewrap creates mount
# points in its own tmpfs and never in SRC.
bindtree() {
	local src=$1 at=$2 e name path d hit
	for e in "$src"/* "$src"/.[!.]* "$src"/..?*; do
		[[ -e $e || -L $e ]] || continue
		name=${e##*/}
		path=$at/$name
		case $path in /proc | /dev | /sys | /tmp) continue ;; esac
		hit=
		for d in "${dests[@]}"; do
			if [[ $d == "$path" ]]; then hit=covered; break; fi
			under "$path" "$d" && hit=descend
		done
		case $hit in
		covered) ;;
		descend) [[ -d $e && ! -L $e ]] && bindtree "$e" "$path" ;;
		*)
			if [[ -L $e ]]; then
				args+=(--symlink "$(readlink "$e")" "$path")
			else
				args+=(--ro-bind "$e" "$path")
			fi
			;;
		esac
	done
}

# start NAME: start container NAME in the background; its pid is in pids[NAME].
start() {
	local c=$pod/c/$1 argv env mounts root wd i e
	mapfile -d '' -t argv <"$c/argv"
	mapfile -d '' -t env <"$c/env"
	mapfile -d '' -t mounts <"$c/mounts"
	root=$(<"$c/root")
	wd=$(<"$c/workdir")
	dests=(/proc /dev /tmp)
	for ((i = 0; i + 2 < ${#mounts[@]}; i += 3)); do dests+=("${mounts[i + 1]}"); done
	args=(--clearenv --unshare-ipc --unshare-uts --hostname "$(<"$pod/hostname")" --proc /proc --dev /dev --bind "$pod/tmp" /tmp --info-fd 3)
	bindtree "${root%/}" ""
	for e in "${env[@]}"; do args+=(--setenv "${e%%=*}" "${e#*=}"); done
	for ((i = 0; i + 2 < ${#mounts[@]}; i += 3)); do
		case ${mounts[i + 2]} in
		rw) args+=(--bind "${mounts[i]}" "${mounts[i + 1]}") ;;
		tmpfs) args+=(--tmpfs "${mounts[i + 1]}") ;;
		*) args+=(--ro-bind "${mounts[i]}" "${mounts[i + 1]}") ;;
		esac
	done
	[[ -n $wd ]] && args+=(--chdir "$wd")
	"$bwrap" "${args[@]}" -- "${argv[@]}" >>"$c/log" 2>&1 3>"$c/info" </dev/null &
	pids[$1]=$!
}

# finish NAME: wait for container NAME, record its exit code and return it.
# A trapped TERM interrupts wait; the container is waited for again.
finish() {
	local pid=${pids[$1]} rc
	while :; do
		wait "$pid"
		rc=$?
		((rc > 128)) && kill -0 "$pid" 2>/dev/null && continue
		break
	done
	put "$pod/c/$1/exit" "$rc"
	return "$rc"
}

# TERM (scancel --batch --signal=TERM, a graceful delete) goes to each
# container's process, which may trap it; the job ends when they exit.
forward() {
	local f pid
	for f in "$pod"/c/*/info; do
		pid=$(sed -n 's/.*"child-pid": *\([0-9]*\).*/\1/p' "$f" 2>/dev/null)
		[[ -n $pid ]] && kill -TERM "$pid" 2>/dev/null
	done
	stopping=1
}
stopping=
trap forward TERM

declare -A pids
mapfile -d '' -t init <"$pod/init"
mapfile -d '' -t main <"$pod/main"
for name in "${init[@]}"; do
	[[ -n $stopping ]] && exit 143
	start "$name"
	finish "$name" || exit 1
done
for name in "${main[@]}"; do start "$name"; done
failed=0
for name in "${main[@]}"; do finish "$name" || failed=1; done
exit $failed
