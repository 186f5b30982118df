# shellcheck shell=bash
# Source this (as root, on Debian) to get a PostgreSQL server on 127.0.0.1 for the audit tests:
#
#   source .ci/postgres.sh || exit 1
#
# It installs Debian's postgresql package when no server is installed, starts the newest installed
# version's "main" cluster (creating it if missing; a server already up is reused), ensures a role
# `gateway` (password: $GATEWAY_TEST_POSTGRES_PASSWORD, default below, URL-safe characters only)
# owning a database `gateway_test`, and exports GATEWAY_TEST_POSTGRES_URL. Running it twice is
# fine. It never exits the shell that sources it: on failure it returns 1 with a message on stderr.

if ! (return 0 2>/dev/null); then
  echo "postgres.sh: source this file (source .ci/postgres.sh), do not run it" >&2
  exit 1
fi

_gw_pg_setup() {
  local user=gateway db=gateway_test
  local password="${GATEWAY_TEST_POSTGRES_PASSWORD:-gateway-test-only}"
  local ver port status i

  if ! compgen -G "/usr/lib/postgresql/*/bin/postgres" >/dev/null \
      || ! command -v pg_lsclusters >/dev/null; then
    echo "postgres.sh: installing PostgreSQL from Debian's packages" >&2
    apt-get update -qq \
      && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null \
      || { echo "postgres.sh: apt-get install postgresql failed" >&2; return 1; }
  fi
  ver=$(find /usr/lib/postgresql -mindepth 1 -maxdepth 1 -printf '%f\n' | sort -V | tail -n 1)
  if [ -z "$ver" ]; then
    echo "postgres.sh: no PostgreSQL version under /usr/lib/postgresql" >&2
    return 1
  fi

  if ! pg_lsclusters -h | awk -v v="$ver" '$1 == v && $2 == "main" {found=1} END {exit !found}'; then
    pg_createcluster "$ver" main >/dev/null \
      || { echo "postgres.sh: pg_createcluster $ver main failed" >&2; return 1; }
  fi
  read -r port status < <(pg_lsclusters -h | awk -v v="$ver" '$1 == v && $2 == "main" {print $3, $4}')
  if [[ "$status" != online* ]]; then
    pg_ctlcluster "$ver" main start \
      || { echo "postgres.sh: pg_ctlcluster $ver main start failed" >&2; return 1; }
  fi
  for i in $(seq 1 100); do
    pg_isready -q -h 127.0.0.1 -p "$port" && break
    sleep 0.1
  done
  if ! pg_isready -q -h 127.0.0.1 -p "$port"; then
    echo "postgres.sh: server $ver/main not accepting connections on 127.0.0.1:$port" >&2
    return 1
  fi

  # As the postgres superuser over the local socket (peer auth); cd / so psql can read its cwd.
  (cd / && runuser -u postgres -- psql -p "$port" -X -q -v ON_ERROR_STOP=1 -d postgres) <<SQL \
    || { echo "postgres.sh: creating role/database failed" >&2; return 1; }
SELECT format('CREATE ROLE %I LOGIN', '$user')
  WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '$user') \gexec
ALTER ROLE $user LOGIN PASSWORD '$password';
SELECT format('CREATE DATABASE %I OWNER %I', '$db', '$user')
  WHERE NOT EXISTS (SELECT FROM pg_database WHERE datname = '$db') \gexec
SQL

  export GATEWAY_TEST_POSTGRES_URL="postgresql://$user:$password@127.0.0.1:$port/$db"
  echo "postgres.sh: PostgreSQL $ver on 127.0.0.1:$port, database $db ready" >&2
}

_gw_pg_setup
_gw_pg_status=$?
unset -f _gw_pg_setup
return "$_gw_pg_status"
