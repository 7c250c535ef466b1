#!/usr/bin/env bash
# astra-sim.sh — runs a Chakra trace kdflow wrote (kdflow extract --format chakra) in ASTRA-sim's
# analytical simulators and prints the simulated time, with ASTRA-sim's roofline on and off, on
# the network and system kdflow ships (share/astra-sim/: an HGX H100 board, NVLink switch,
# 400 GB/s and 936.25 ns per link). docs/chakra.md explains the figures.
#
#   scripts/astra-sim.sh mlp.et                  # a one-rank trace: every NPU runs a copy (2 NPUs)
#   scripts/astra-sim.sh --npus 8 mlp.et
#   scripts/astra-sim.sh llm.et                  # a sharded flow's llm.0.et ... llm.<R-1>.et: R NPUs
#   scripts/astra-sim.sh --roofline on --simulator both --network my.yml mlp.et
#
# Options: --npus N, --roofline on|off|both (default both), --simulator unaware|aware|both
# (default unaware), --network FILE.yml (its npus_count is set to N), --system FILE.json (its
# roofline-enabled and local-mem-bw are set), --keep DIR (keep the configurations and logs there).
# ASTRA-sim is taken from PATH, else from $KDFLOW_ASTRA_SIM_ENV or ../shared/astra-sim/env.sh.
# Prints one line per run: `roofline on, congestion unaware, 2 NPUs: 5123 ns (per NPU: 5123 5123)`.
# Exits 1 when a run does not finish on every NPU (ASTRA-sim itself exits 0 then), 64 on usage.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

usage() {
  sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d' | sed 's/^# \{0,1\}//' >&2
  exit 64
}
die() {
  echo "astra-sim.sh: error: $*" >&2
  exit "${2:-1}"
}

npus="" roofline=both simulator=unaware keep=""
network="$root/share/astra-sim/network-hgx-h100.yml"
system="$root/share/astra-sim/system.json"
memory="$root/share/astra-sim/remote-memory.json"
trace=""
while [ $# -gt 0 ]; do
  case "$1" in
    --npus) npus=${2:?}; shift 2 ;;
    --roofline) roofline=${2:?}; shift 2 ;;
    --simulator) simulator=${2:?}; shift 2 ;;
    --network) network=${2:?}; shift 2 ;;
    --system) system=${2:?}; shift 2 ;;
    --keep) keep=${2:?}; shift 2 ;;
    -h|--help) usage ;;
    -*) echo "astra-sim.sh: error: unknown option $1" >&2; usage ;;
    *) [ -z "$trace" ] || usage; trace=$1; shift ;;
  esac
done
[ -n "$trace" ] || usage
case "$roofline" in on) modes=(on) ;; off) modes=(off) ;; both) modes=(off on) ;; *) usage ;; esac
case "$simulator" in unaware) sims=(Unaware) ;; aware) sims=(Aware) ;; both) sims=(Unaware Aware) ;; *) usage ;; esac
[ -z "$npus" ] || [[ "$npus" =~ ^[0-9]+$ && "$npus" -ge 2 ]] ||
  die "--npus $npus: ASTRA-sim's analytical networks need at least 2 NPUs" 64
for f in "$network" "$system" "$memory"; do [ -r "$f" ] || die "$f: cannot read" 66; done

# The trace: PREFIX.<r>.et for every rank of a sharded flow, else one file every NPU runs.
prefix=${trace%.et}
ranks=0
while [ -e "$prefix.$ranks.et" ]; do ranks=$((ranks + 1)); done
if [ "$ranks" -gt 0 ]; then
  [ -z "$npus" ] || [ "$npus" -eq "$ranks" ] ||
    die "$prefix.0.et ... $prefix.$((ranks - 1)).et are $ranks ranks, not --npus $npus" 64
  [ "$ranks" -ge 2 ] || die "$prefix.0.et is the only rank: give the one-rank trace itself" 64
  npus=$ranks
  first="$prefix.0.et"
else
  [ -f "$trace" ] || die "$trace: no such trace (nor $prefix.0.et)" 66
  npus=${npus:-2}
  first="$trace"
fi

if ! command -v AstraSim_Analytical_Congestion_Unaware >/dev/null 2>&1; then
  env_sh=${KDFLOW_ASTRA_SIM_ENV:-$root/../shared/astra-sim/env.sh}
  [ -r "$env_sh" ] || die "ASTRA-sim not found: put AstraSim_Analytical_Congestion_{Unaware,Aware} on PATH or set KDFLOW_ASTRA_SIM_ENV to its env.sh" 69
  # shellcheck disable=SC1090
  . "$env_sh" >/dev/null || die "$env_sh failed" 69
fi

# The DRAM bandwidth the trace's roofline times are encoded with (its metadata, a string
# protobuf keeps verbatim); ASTRA-sim's system file must say the same.
bw=$(head -c 65536 "$first" | grep -a -o '"local-mem-bw": [0-9]*' | head -n1 | grep -o '[0-9]*$' || true)
[ -n "$bw" ] || echo "astra-sim.sh: warning: $first names no local-mem-bw (not written by kdflow?): roofline times are ASTRA-sim's own" >&2

if [ -n "$keep" ]; then
  mkdir -p "$keep"
  work=$(cd "$keep" && pwd)
else
  work=$(mktemp -d "${TMPDIR:-/tmp}/kdflow-astra-sim.XXXXXX")
  trap 'rm -rf "$work"' EXIT
fi
abs() { (cd "$(dirname "$1")" && echo "$(pwd)/$(basename "$1")"); }
for ((r = 0; r < npus; r++)); do
  if [ "$ranks" -gt 0 ]; then ln -sf "$(abs "$prefix.$r.et")" "$work/trace.$r.et"; else ln -sf "$(abs "$trace")" "$work/trace.$r.et"; fi
done
sed -E "s/^(npus_count:[[:space:]]*)\[[^]]*\]/\1[ $npus ]/" "$network" >"$work/network.yml"
grep -q "^npus_count: \[ $npus \]" "$work/network.yml" ||
  die "$network: expected a one-dimensional network ('npus_count: [ N ]')" 65
cp "$memory" "$work/remote-memory.json"

status=0
for mode in "${modes[@]}"; do
  flag=0; [ "$mode" = on ] && flag=1
  set_bw=()
  [ -z "$bw" ] || set_bw=(-e "s/(\"local-mem-bw\"[[:space:]]*:[[:space:]]*)[0-9.]+/\1$bw/")
  sed -E -e "s/(\"roofline-enabled\"[[:space:]]*:[[:space:]]*)[0-9]+/\1$flag/" "${set_bw[@]}" "$system" >"$work/system-$mode.json"
  grep -q "\"roofline-enabled\": *$flag" "$work/system-$mode.json" ||
    die "$system: has no \"roofline-enabled\" key to set" 65
  for sim in "${sims[@]}"; do
    log="$work/$mode-$sim.log"
    "AstraSim_Analytical_Congestion_$sim" --workload-configuration="$work/trace" \
      --system-configuration="$work/system-$mode.json" --remote-memory-configuration="$work/remote-memory.json" \
      --network-configuration="$work/network.yml" --logging-folder="$work/log-$mode-$sim" >"$log" 2>&1 || true
    times=()
    for ((r = 0; r < npus; r++)); do
      t=$(grep -o "sys\[$r\] finished, [0-9]* cycles" "$log" | grep -o '[0-9]* cycles' | grep -o '[0-9]*' || true)
      times+=("${t:-unfinished}")
    done
    name="congestion $(tr '[:upper:]' '[:lower:]' <<<"$sim")"
    if [[ " ${times[*]} " == *" unfinished "* ]]; then
      echo "astra-sim.sh: error: roofline $mode, $name: not every NPU finished: $(grep -m1 -E 'critical|error|Error' "$log" || tail -n1 "$log")" >&2
      status=1
      continue
    fi
    max=0
    for t in "${times[@]}"; do [ "$t" -gt "$max" ] && max=$t; done
    echo "roofline $mode, $name, $npus NPUs: $max ns (per NPU: ${times[*]})"
  done
done
exit $status
