#!/usr/bin/env bash
# Instructions per request through the gateway, with valgrind's callgrind (deterministic enough
# to compare commits where wall-clock numbers drown in noise): the gateway is run under
# callgrind twice, serving N1 then N2 sequential requests, and the difference in instructions
# is divided by N2 - N1, so start-up and shutdown cancel out. Run it on an otherwise idle
# machine: concurrent load changes how often the event loop wakes, and so the count.
#
#   python ../shared/bench/fake_upstream.py --port 18080 &
#   scripts/bench/callgrind_per_request.sh responses /v1/responses bench-fake-stop --stream
#   scripts/bench/callgrind_per_request.sh openai /v1/chat/completions bench-fake-stop
#
# Formats: "openai" (Chat Completions) or "responses"; models route by config/bench.toml
# (bench-* same format, xbench-* Anthropic wire, rbench-* Responses wire).
set -euo pipefail
fmt=$1; path=$2; model=$3; stream=${4:-}
n1=${N1:-100}; n2=${N2:-500}
repo=$(cd "$(dirname "$0")/../.." && pwd)
py=${PYTHON:-$repo/.venv/bin/python}
work=$(mktemp -d)
port=$((8100 + RANDOM % 800))
count() {
  sed "s#^port = 8080#port = $port#" "$repo/config/bench.toml" > "$work/bench.toml"
  printf '\n[audit]\nstore = "sqlite:///%s"\n' "$work/audit-$1.db" >> "$work/bench.toml"
  (cd "$repo" && exec env PYTHONHASHSEED=0 XDG_DATA_HOME="$work" valgrind --tool=callgrind \
     --callgrind-out-file="$work/cg-$1.out" "$py" -m gateway serve --workers 1 --config "$work/bench.toml") \
     > "$work/gateway-$1.log" 2>&1 &
  gw=$!
  for _ in $(seq 600); do grep -q "listening on" "$work/gateway-$1.log" && break; sleep 0.5; done
  "$py" "$repo/scripts/bench/sequential_load.py" --url "http://127.0.0.1:$port$path" \
     --model "$model" --format "$fmt" $stream -n "$1"
  kill -TERM $gw; wait $gw || true
  grep -h "^summary:\|^totals:" "$work/cg-$1.out" | head -1 | awk '{print $2}'
}
a=$(count "$n1"); b=$(count "$n2")
echo "$fmt $path $model $stream: $(( (b - a) / (n2 - n1) )) instructions/request"
rm -rf "$work"
