#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Lint every shell script git tracks (make lint-sh): the *.sh files and
# any other file whose first line is a sh or bash shebang (.ci/run).
# Each gets `bash -n` and `shellcheck -x` at its default severity (style
# included).  Sourced paths resolve from the script's directory and its
# parent (`. scripts/lib.sh` from scripts/ or bench/, `. tests/stats.sh`
# from tools/tests/run.sh) and from the top of the tree.  Files without a
# shebang name their shell in a `# shellcheck shell=` line.
# Prints every finding and one summary line; exits 1 on any finding,
# 2 when shellcheck is missing (make deps installs it).
set -uo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top" || exit 2

if ! command -v shellcheck >/dev/null; then
	echo "lint-sh: shellcheck not installed (make deps)" >&2
	exit 2
fi
if ! git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
	echo "lint-sh: not a git work tree: $top" >&2
	exit 2
fi

files=()
while IFS= read -r -d '' f; do
	[ -f "$f" ] || continue
	case "$f" in
	*.sh) files+=("$f"); continue ;;
	esac
	IFS= read -r first <"$f" 2>/dev/null || continue
	case "$first" in
	'#!'*/sh | '#!'*/sh[[:space:]]* | '#!'*/bash | '#!'*/bash[[:space:]]* | \
	'#!'*env[[:space:]]sh | '#!'*env[[:space:]]bash | '#!'*env[[:space:]]bash[[:space:]]*)
		files+=("$f") ;;
	esac
done < <(git ls-files -z)

if [ ${#files[@]} = 0 ]; then
	echo "lint-sh: no shell scripts found" >&2
	exit 2
fi

syntax_bad=0
for f in "${files[@]}"; do
	bash -n "$f" || syntax_bad=$((syntax_bad + 1))
done

out=$(shellcheck -x -P SCRIPTDIR -P SCRIPTDIR/.. -f gcc "${files[@]}" 2>&1)
sc_rc=$?
[ -n "$out" ] && printf '%s\n' "$out"
findings=0
sc_files=0
if [ -n "$out" ]; then
	findings=$(printf '%s\n' "$out" | grep -c ':[0-9]*:[0-9]*: [a-z]*: ')
	sc_files=$(printf '%s\n' "$out" | grep ':[0-9]*:[0-9]*: [a-z]*: ' | cut -d: -f1 | sort -u | wc -l)
fi

if [ $syntax_bad = 0 ]; then
	syntax="bash -n clean"
else
	syntax="bash -n: $syntax_bad file(s) failed"
fi
if [ "$sc_rc" = 0 ] && [ -z "$out" ]; then
	sc="shellcheck clean"
elif [ "$findings" -gt 0 ]; then
	sc="shellcheck: $findings finding(s) in $sc_files file(s)"
else
	sc="shellcheck failed (exit $sc_rc)"
fi
echo "lint-sh: ${#files[@]} files, $syntax, $sc"
[ $syntax_bad = 0 ] && [ "$sc_rc" = 0 ] && [ -z "$out" ]
