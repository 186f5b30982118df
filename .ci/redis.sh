# shellcheck shell=bash
# Source this (as root, on Debian) to get a Redis server on 127.0.0.1 for the shared-state tests:
#
#   source .ci/redis.sh || exit 1
#
# It installs Debian's redis-server package when no server is installed, starts one of its own
# as a daemon on a free loopback port (no persistence, its files under /tmp/gateway-test-redis;
# one already started by an earlier run is reused while it answers), and exports
# GATEWAY_TEST_REDIS_URL. Running it twice is fine. It never exits the shell that sources it: on
# failure it returns 1 with a message on stderr.

if ! (return 0 2>/dev/null); then
  echo "redis.sh: source this file (source .ci/redis.sh), do not run it" >&2
  exit 1
fi

_gw_redis_setup() {
  local dir=/tmp/gateway-test-redis port i

  if ! command -v redis-server >/dev/null || ! command -v redis-cli >/dev/null; then
    echo "redis.sh: installing redis-server from Debian's packages" >&2
    apt-get update -qq \
      && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null \
      || { echo "redis.sh: apt-get install redis-server failed" >&2; return 1; }
  fi
  mkdir -p "$dir" || { echo "redis.sh: cannot create $dir" >&2; return 1; }

  if [ -s "$dir/port" ] && redis-cli -h 127.0.0.1 -p "$(cat "$dir/port")" ping 2>/dev/null \
      | grep -q PONG; then
    port=$(cat "$dir/port")
  else
    port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])') \
      || { echo "redis.sh: no free port" >&2; return 1; }
    redis-server --bind 127.0.0.1 --port "$port" --daemonize yes --save "" --appendonly no \
      --dir "$dir" --pidfile "$dir/redis.pid" --logfile "$dir/redis.log" >/dev/null \
      || { echo "redis.sh: redis-server did not start (see $dir/redis.log)" >&2; return 1; }
    for i in $(seq 1 100); do
      redis-cli -h 127.0.0.1 -p "$port" ping 2>/dev/null | grep -q PONG && break
      sleep 0.1
    done
    if ! redis-cli -h 127.0.0.1 -p "$port" ping 2>/dev/null | grep -q PONG; then
      echo "redis.sh: redis-server not answering on 127.0.0.1:$port (see $dir/redis.log)" >&2
      return 1
    fi
    echo "$port" >"$dir/port"
  fi

  export GATEWAY_TEST_REDIS_URL="redis://127.0.0.1:$port/0"
  echo "redis.sh: Redis $(redis-server --version | awk '{print $3}' | sed 's/^v=//') on 127.0.0.1:$port ready" >&2
}

_gw_redis_setup
_gw_redis_status=$?
unset -f _gw_redis_setup
return "$_gw_redis_status"
