# shellcheck shell=bash
# Source this (as root, on Debian) to get HAProxy for the scale-out tests (tests/scale_stack.py):
#
#   source .ci/haproxy.sh || exit 1
#
# It installs Debian's haproxy package when the program is missing and exports
# GATEWAY_TEST_HAPROXY, its path. The tests start their own haproxy on free loopback ports; the
# package's own service is stopped, as it listens on nothing the tests need. It never exits the
# shell that sources it: on failure it returns 1 with a message on stderr.

if ! (return 0 2>/dev/null); then
  echo "haproxy.sh: source this file (source .ci/haproxy.sh), do not run it" >&2
  exit 1
fi

_gw_haproxy_setup() {
  local path
  path=$(command -v haproxy || true)
  if [ -z "$path" ] && [ -x /usr/sbin/haproxy ]; then
    path=/usr/sbin/haproxy
  fi
  if [ -z "$path" ]; then
    echo "haproxy.sh: installing haproxy from Debian's packages" >&2
    apt-get update -qq \
      && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq haproxy >/dev/null \
      || { echo "haproxy.sh: apt-get install haproxy failed" >&2; return 1; }
    path=/usr/sbin/haproxy
    service haproxy stop >/dev/null 2>&1 || true
  fi
  "$path" -v >/dev/null 2>&1 || { echo "haproxy.sh: $path does not run" >&2; return 1; }
  export GATEWAY_TEST_HAPROXY="$path"
  echo "haproxy.sh: $("$path" -v | head -1 | awk '{print $1, $3}') at $path" >&2
}

_gw_haproxy_setup
_gw_haproxy_status=$?
unset -f _gw_haproxy_setup
return "$_gw_haproxy_status"
