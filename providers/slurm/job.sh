#!/bin/bash
# The batch script of every pod the slurm provider of virtual-kubelet runs.
# Its text never changes: what the pod runs is read as data (NUL-separated
# lists) from the pod directory, never parsed as shell (but for a container
# with a terminal: see start).
#
#   job.sh POD_DIR LAUNCHER BWRAP
#
# The job runs as the pod's tenant. POD_DIR/init and POD_DIR/main list the
# containers; each POD_DIR/c/NAME holds the container's plan, which
# LAUNCHER (virtual-kubelet-slurm-container) reads to start it under
# bubblewrap, and stdin ("yes" when the container keeps a standard input
# to attach to) and tty ("yes" when it runs on a terminal of its own),
# which this script reads. The script writes c/NAME/info (bwrap's
# child pid), c/NAME/log (stdout and stderr as stamped records, see stamp
# below) and c/NAME/exit (the exit code), each exit file complete once it
# exists. A container with stdin reads the fifo c/NAME/in, which a holder
# process (pid in c/NAME/in.holder) keeps open for writing, so the container
# sees end of file only once the holder is gone and no attach writes.
set -u
pod=$1
launcher=$2
bwrap=$3
umask 077
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

# put FILE VALUE: write atomically, so a reader never sees half a file.
put() { printf '%s\n' "$2" >"$1.tmp" && mv -f "$1.tmp" "$1"; }

# stamp, run by perl with the container's stdout and stderr fifos, its log
# file and the rotation bounds (MAX bytes a file, FILES files) as
# arguments, appends each chunk read from either to the log as records,
# one a line: "TIME STREAM TAG TEXT", TIME in RFC 3339 with nanoseconds
# (UTC), STREAM stdout or stderr, TAG F when TEXT ends a line and P for a
# partial one (a prompt with no newline yet): the format of the kubelet's
# CRI logs, which the provider reads back for timestamps and since. Once the
# log holds MAX bytes it becomes log.1 (log.1 becomes log.2, ..., up to
# FILES - 1 of them), as the kubelet rotates containerLogMaxSize and
# containerLogMaxFiles: a container cannot fill the node's disk.
# shellcheck disable=SC2016 # perl's own variables
stamp='use Time::HiRes qw(time);
my ($out, $err, $log, $max, $files) = @ARGV;
open(my $o, "<", $out) or die "$out: $!";
open(my $e, "<", $err) or die "$err: $!";
my $l;
sub reopen { open($l, ">>", $log) or die "$log: $!"; binmode $l }
reopen();
my $size = -s $l;
my @open = ([$o, "stdout"], [$e, "stderr"]);
while (@open) {
	my $in = "";
	vec($in, fileno($_->[0]), 1) = 1 for @open;
	next if select(my $ready = $in, undef, undef, undef) <= 0;
	for my $s (@open) {
		next unless vec($ready, fileno($s->[0]), 1);
		my $n = sysread($s->[0], my $buf, 65536);
		if (!$n) { $s->[2] = 1; next }
		my $t = time;
		my @g = gmtime(int $t);
		my $ts = sprintf("%04d-%02d-%02dT%02d:%02d:%02d.%06d000Z", $g[5] + 1900, $g[4] + 1, @g[3, 2, 1, 0], ($t - int $t) * 1e6);
		my $rec = "";
		for my $line (split /(?<=\n)/, $buf) {
			$rec .= $line =~ /\n\z/ ? "$ts $s->[1] F $line" : "$ts $s->[1] P $line\n";
		}
		syswrite($l, $rec);
		$size += length $rec;
		if ($size >= $max) {
			for (my $i = $files - 1; $i > 1; $i--) { rename("$log." . ($i - 1), "$log.$i") }
			if ($files > 1) { rename($log, "$log.1") } else { unlink($log) }
			close($l);
			reopen();
			$size = 0;
		}
	}
	@open = grep { !$_->[2] } @open;
}'

# start NAME: start container NAME in the background; its pid is in pids[NAME].
start() {
	local c=$pod/c/$1 in=/dev/null
	if [[ $(<"$c/stdin") == yes ]]; then
		in=$c/in
		rm -f "$in" && mkfifo -m 0600 "$in"
		# Read-write: the open does not wait for a reader, and sleep never
		# reads.
		sleep infinity <>"$in" >/dev/null 2>&1 &
		put "$c/in.holder" $!
	fi
	rm -f "$c/out" "$c/err" && mkfifo -m 0600 "$c/out" "$c/err"
	perl -e "$stamp" "$c/out" "$c/err" "$c/log" "${logmax[0]}" "${logmax[1]}" </dev/null &
	stampers[$1]=$!
	# The launcher becomes bwrap, with --die-with-parent: a signal that
	# kills this script's child (scancel, a time limit) kills the container
	# too; orphaned, it would escape proctrack/linuxproc, which finds a
	# job's processes by their parents, and outlive the job.
	local run=("$launcher" "$pod" "$1" "$bwrap")
	if [[ $(<"$c/tty") == yes ]]; then
		# script (util-linux) runs the container on a new terminal, whose
		# output is its stdout. It takes a command line for $SHELL: each
		# word is quoted with printf %q, which bash reads back as it was.
		run=(env SHELL=/bin/bash script --quiet --return --flush --command "$(printf '%q ' "${run[@]}")" /dev/null)
	fi
	"${run[@]}" >"$c/out" 2>"$c/err" 3>"$c/info" <"$in" &
	pids[$1]=$!
}

# finish NAME: wait for container NAME, record its exit code and return it.
# A trapped TERM interrupts wait; the container is waited for again. Its log
# is complete before the exit file says it ended, unless a process it left
# behind keeps its output open for more than two seconds.
finish() {
	local pid=${pids[$1]} c=$pod/c/$1 rc i
	while :; do
		wait "$pid"
		rc=$?
		((rc > 128)) && kill -0 "$pid" 2>/dev/null && continue
		break
	done
	for ((i = 0; i < 20; i++)); do
		kill -0 "${stampers[$1]}" 2>/dev/null || break
		sleep 0.1
	done
	# The holder of the stdin fifo; in.once once a stdinOnce attach took it.
	for i in "$c/in.holder" "$c/in.once"; do
		[[ -s $i ]] && kill "$(<"$i")" 2>/dev/null
	done
	put "$c/exit" "$rc"
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

declare -A pids stampers
# The log rotation's bounds: bytes a file, files a container.
read -r -a logmax <"$pod/logmax"
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
