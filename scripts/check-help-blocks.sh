#!/usr/bin/env bash
# check-help-blocks.sh KDFLOW — every usage block of the docs (a region between
# `<!-- help: CMD -->` and `<!-- /help -->` in README.md, docs/*.md or docs/how/*.md; today
# docs/reference.md) must hold exactly what scripts/render-docs.sh writes there: a text block
# with `$ kdflow CMD --help` and the binary's output (scripts/help-block.sh, which render-docs.sh
# writes them with). Run by ctest ("layout: docs' usage blocks equal kdflow CMD --help") with the
# built binary.
# Exits 1 naming each command whose block differs (with the diff), 2 on a usage error.
set -euo pipefail
[ $# -eq 1 ] || { echo "usage: check-help-blocks.sh KDFLOW" >&2; exit 2; }
kdflow=$1
[ -x "$kdflow" ] || { echo "check-help-blocks: $kdflow is not an executable" >&2; exit 2; }
cd "$(dirname "${BASH_SOURCE[0]}")/.."

. scripts/help-block.sh
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# What render-docs.sh writes between the markers for CMD.
expected() { help_block "$kdflow" "$1"; }

status=0
blocks=0
compare() {  # FILE LINE CMD: the block collected in $tmp/actual
  blocks=$((blocks + 1))
  if ! expected "$3" >"$tmp/expected" 2>"$tmp/stderr"; then
    echo "check-help-blocks: $1:$2: \`kdflow $3 --help\` failed: $(head -n 1 "$tmp/stderr")"
    status=1
    return
  fi
  if ! diff -u --label "$1 (the block at line $2)" --label "kdflow $3 --help" "$tmp/actual" "$tmp/expected" >"$tmp/diff"; then
    echo "check-help-blocks: $1:$2: the usage block of \`kdflow $3\` differs from \`kdflow $3 --help\` (run scripts/render-docs.sh):"
    cat "$tmp/diff"
    status=1
  fi
}

for doc in README.md docs/*.md docs/how/*.md; do
  [ -f "$doc" ] || continue
  inside=0 n=0 start=0 cmd=""
  while IFS= read -r line || [ -n "$line" ]; do
    n=$((n + 1))
    if [ "$inside" = 1 ]; then
      if [ "$line" = "<!-- /help -->" ]; then
        compare "$doc" "$start" "$cmd"
        inside=0
      elif [[ $line =~ $help_re ]]; then
        echo "check-help-blocks: $doc:$n: a usage block opens inside the one of \`kdflow $cmd\` (line $start), which has no <!-- /help -->"
        status=1
        inside=0
      else
        printf '%s\n' "$line" >>"$tmp/actual"
      fi
    fi
    if [ "$inside" = 0 ] && [[ $line =~ $help_re ]]; then
      cmd=${BASH_REMATCH[1]} start=$n inside=1
      : >"$tmp/actual"
    fi
  done <"$doc"
  if [ "$inside" = 1 ]; then
    echo "check-help-blocks: $doc:$start: the usage block of \`kdflow $cmd\` has no <!-- /help -->"
    status=1
  fi
done

if [ "$blocks" = 0 ]; then
  echo "check-help-blocks: no <!-- help: CMD --> block in README.md, docs/*.md or docs/how/*.md"
  exit 1
fi
[ "$status" = 0 ] && echo "check-help-blocks: ok ($blocks usage blocks equal kdflow CMD --help)"
exit "$status"
