#!/usr/bin/env bash
# check-layout.sh — checks the map of docs/how-kdflow-works.md ("The map"): every
# `#include "kdflow/<concern>/..."` in lib/<folder>/ and include/kdflow/<folder>/ must name a
# concern the folder may depend on, the stages that must not print (support, formats, ir,
# analysis, emit, frontend) use no std::cout/std::cerr, and every source path the docs name exists. Run by ctest ("layout: ...").
# Exits 1 with one line per violation.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

declare -A allowed=(
  [support]="support"
  [ir]="support ir"
  [formats]="support ir formats"
  [analysis]="support ir formats analysis"
  [emit]="support ir analysis emit"
  [frontend]="support ir formats analysis frontend"
  [replay]="support ir formats analysis replay"
  [codegen]="support ir formats analysis replay codegen"
  [driver]="support ir formats analysis emit frontend replay codegen driver"
)
# The one exception: replay's options carry the front end's input options (ExtractInputs).
exception='^include/kdflow/replay/replay\.h:.*"kdflow/frontend/extract\.h"'

status=0
for folder in "${!allowed[@]}"; do
  for dir in "lib/$folder" "include/kdflow/$folder"; do
    [ -d "$dir" ] || continue
    while IFS= read -r hit; do
      [ -n "$hit" ] || continue
      concern=$(sed -E 's#.*"kdflow/([a-z]+)/.*#\1#' <<<"$hit")
      if [[ " ${allowed[$folder]} " != *" $concern "* ]] && ! [[ $hit =~ $exception ]]; then
        echo "check-layout: $hit: $folder/ may not include kdflow/$concern/ (allowed: ${allowed[$folder]})"
        status=1
      fi
    done < <(grep -rnE '#include "kdflow/[a-z]+/' "$dir" || true)
  done
done
for folder in support formats ir analysis emit frontend codegen; do
  while IFS= read -r hit; do
    [ -n "$hit" ] || continue
    echo "check-layout: $hit: $folder/ must not print (return the result; the driver prints)"
    status=1
  done < <(grep -rnE 'std::(cout|cerr|clog)\b' "lib/$folder" "include/kdflow/$folder" 2>/dev/null || true)
done
# The docs name only paths that exist (the map and the stage pages, docs/how/, go stale when files move).
while IFS= read -r p; do
  [ -e "$p" ] || { echo "check-layout: the docs name $p, which does not exist"; status=1; }
done < <(grep -rhoE '(lib|include/kdflow|test)/[A-Za-z0-9_/]*\.(cpp|h)' README.md docs/*.md docs/how/*.md | sort -u)
[ "$status" = 0 ] && echo "check-layout: ok (${#allowed[@]} folders, the docs' paths exist)"
exit "$status"
