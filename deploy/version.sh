#!/bin/sh
# Prints the version make stamps into release builds: the nearest v* tag as
# git describe gives it, or else a Go-style pseudo-version of the commit
# (v0.0.0-YYYYMMDDHHMMSS-abcdef123456); "-dirty" or "+dirty" when the work
# tree has uncommitted changes. Outside a git checkout: v0.0.0-unknown.
if ! git rev-parse --git-dir >/dev/null 2>&1; then
	echo v0.0.0-unknown
	exit 0
fi
if v=$(git describe --tags --match 'v[0-9]*' --dirty 2>/dev/null); then
	echo "$v"
	exit 0
fi
v=$(TZ=UTC git log -1 --format=%cd-%H --date=format-local:%Y%m%d%H%M%S | cut -c1-27)
dirty=
git diff --quiet HEAD -- 2>/dev/null || dirty=+dirty
echo "v0.0.0-$v$dirty"
