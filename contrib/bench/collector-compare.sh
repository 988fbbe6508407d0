#!/bin/sh
# Compares the collector of a git revision (BASE, default main) with the
# work tree, side by side: test binaries of dataplane/collector built from
# both (each with its tree's cmd/intcollector/default.pgo when it has one,
# as intcollector is built) run in alternation, ROUNDS rounds (default 5),
# the order swapped every round. Per round and variant: decode +
# aggregate CPU per report (BenchmarkDecodeAggregate, one CPU) and the
# receive path against a null receiver (BenchmarkReceiveVsNull: medians
# of its own interleaved rounds, by CPU per report and by rate; with
# BenchmarkReceiveVsNullDatagrams too where the tree has it: a sender
# without GSO, "-" otherwise; and BenchmarkReceiveVsNullIntd: one UDP GSO
# message of up to 64 datagrams per sendmsg, as intd's report sender). Prints each figure per round with the
# 1-minute load average, then the median (min-max) per variant and of the
# work tree / BASE ratios.
#
#   make bench-collector BASE=main ROUNDS=5
set -eu
base=${BASE:-main}
rounds=${ROUNDS:-5}
top=$(git rev-parse --show-toplevel)
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT INT TERM
mkdir "$dir/src"
git -C "$top" archive "$base" | tar -x -C "$dir/src"

build() { # tree output
	pgo=off
	[ -f "$1/cmd/intcollector/default.pgo" ] && pgo="$1/cmd/intcollector/default.pgo"
	(cd "$1" && go test -pgo="$pgo" -c -o "$2" ./dataplane/collector/)
	echo "$2: pgo=$pgo"
}
build "$dir/src" "$dir/base.test"
build "$top" "$dir/tree.test"

# run VARIANT ROUND: one round of both benchmarks, appended to $dir/VARIANT.
run() {
	load=$(cut -d' ' -f1 /proc/loadavg)
	ns=$("$dir/$1.test" -test.run '^$' -test.bench 'DecodeAggregate$' -test.cpu 1 -test.benchtime 2000000x |
		awk '/^BenchmarkDecodeAggregate/ { for (i = 1; i < NF; i++) if ($(i+1) == "reports/cpu-s") printf "%.1f", 1e9 / $i }')
	rv=$("$dir/$1.test" -test.run '^$' -test.bench 'ReceiveVsNull(Datagrams|Intd)?$' -test.benchtime 100000x |
		awk '/^BenchmarkReceiveVsNull-/ { for (i = 1; i < NF; i++) { if ($(i+1) == "cpu/null") c = $i; if ($(i+1) == "recv/null") r = $i; if ($(i+1) == "recv/null-min") m = $i } }
			/^BenchmarkReceiveVsNullDatagrams-/ { for (i = 1; i < NF; i++) { if ($(i+1) == "cpu/null") dc = $i; if ($(i+1) == "recv/null") dr = $i } }
			/^BenchmarkReceiveVsNullIntd-/ { for (i = 1; i < NF; i++) { if ($(i+1) == "cpu/null") ic = $i; if ($(i+1) == "recv/null") ir = $i } }
			END { if (dc == "") { dc = "-"; dr = "-" }; if (ic == "") { ic = "-"; ir = "-" }; printf "%s %s %s %s %s %s %s", c, r, dc, dr, m, ic, ir }')
	set -- "$1" "$2" $rv
	echo "$ns $3 $4 $5 $6 $load $7 $8 $9" >>"$dir/$1"
	echo "round $2 $1: decode+aggregate $ns cpu-ns/report; receive cpu/null $3, recv/null $4 (lowest inner round $7); datagrams cpu/null $5, recv/null $6; intd-like cpu/null $8, recv/null $9; load $load"
}
i=1
while [ "$i" -le "$rounds" ]; do
	if [ $((i % 2)) -eq 1 ]; then run base "$i"; run tree "$i"; else run tree "$i"; run base "$i"; fi
	i=$((i + 1))
done

# med FILE COLUMN: median (min-max) of a column ("-" if it has none).
med() {
	cut -d' ' -f"$2" "$1" | grep -v '^-$' | sort -g |
		awk '{ v[NR] = $1 } END { if (NR == 0) printf "-"; else printf "%.3g (%.3g-%.3g)", v[int((NR + 1) / 2)], v[1], v[NR] }'
}
paste -d' ' "$dir/tree" "$dir/base" | awk '{ h = NF / 2; print $1 / $(1 + h), $2 / $(2 + h), $3 / $(3 + h) }' >"$dir/ratio"
for v in base tree; do
	echo "$v: decode+aggregate $(med "$dir/$v" 1) cpu-ns/report; receive cpu/null $(med "$dir/$v" 2), recv/null $(med "$dir/$v" 3), lowest inner round $(med "$dir/$v" 7); datagrams cpu/null $(med "$dir/$v" 4), recv/null $(med "$dir/$v" 5); intd-like cpu/null $(med "$dir/$v" 8), recv/null $(med "$dir/$v" 9)"
done
echo "tree/base per round: decode+aggregate cpu-ns $(med "$dir/ratio" 1); cpu/null $(med "$dir/ratio" 2); recv/null $(med "$dir/ratio" 3)"
echo "load average $(cut -d' ' -f6 "$dir/base" "$dir/tree" | sort -g | awk '{ v[NR] = $1 } END { printf "%s-%s", v[1], v[NR] }')"
