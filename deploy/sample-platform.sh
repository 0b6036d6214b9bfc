#!/usr/bin/env bash
# A sample platform to try `yuxi-dash attach` on, in one command.
#
#   deploy/sample-platform.sh [--reset] [ADMIN_URL] [PORT]
#
# ADMIN_URL: a PostgreSQL URL of a role that may create databases and roles
#            (default postgresql://127.0.0.1/postgres).
# PORT:      where the platform's compress endpoint listens (default 8600).
# --reset:   drop the sample database of an earlier run and seed it again.
#
# It creates the database `yuxi_sample_platform`, seeds the demo threads into it
# (`yuxi-dash demo --no-memory`: real LangGraph checkpoints that name each
# thread's user and agent), creates the role `yuxi_sample_reader` that may only
# SELECT the three checkpoint tables, creates an operator API token, prints what
# to export in the dashboard's shell, then serves the platform's compress
# endpoint (`yuxi-dash api serve`) in the foreground until Ctrl-C.
# The sample's files (its workdir) live under var/sample-platform/.
# Needs `psql` and `yuxi-dash` on PATH (activate the venv first).
set -euo pipefail

usage() {
    sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'
}

reset=false
positional=()
for arg in "$@"; do
    case "$arg" in
        --reset) reset=true ;;
        -h | --help)
            usage
            exit 0
            ;;
        -*)
            echo "unknown option: $arg" >&2
            usage >&2
            exit 2
            ;;
        *) positional+=("$arg") ;;
    esac
done
if [ "${#positional[@]}" -gt 2 ]; then
    usage >&2
    exit 2
fi

admin_url="${positional[0]:-postgresql://127.0.0.1/postgres}"
port="${positional[1]:-8600}"
database=yuxi_sample_platform
reader=yuxi_sample_reader

case "$port" in
    '' | *[!0-9]*)
        echo "PORT must be a number: $port" >&2
        exit 2
        ;;
esac
# psql speaks plain postgresql:// URLs: drop a SQLAlchemy driver suffix (+psycopg)
admin_url="${admin_url/postgresql+psycopg:\/\//postgresql://}"
case "$admin_url" in
    postgresql://*/* | postgres://*/*) ;;
    *)
        echo "ADMIN_URL must be postgresql://[user[:password]@]host[:port]/database" >&2
        exit 2
        ;;
esac

# The sample database's URL: the admin URL with its database swapped (query kept).
admin_base="${admin_url%%\?*}"
admin_query="${admin_url#"$admin_base"}"
sample_url="${admin_base%/*}/${database}${admin_query}"
# host[:port] of the server, without the admin's user and password
server="${admin_base#*://}"
server="${server%%/*}"
server="${server##*@}"
reader_url="postgresql://${reader}@${server}/${database}"

for tool in psql yuxi-dash; do
    if ! command -v "$tool" >/dev/null; then
        echo "$tool is not on PATH (for yuxi-dash: activate the venv)" >&2
        exit 1
    fi
done

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
root="$repo/var/sample-platform"

admin_sql() {
    psql "$admin_url" -v ON_ERROR_STOP=1 -qAt "$@"
}

# 1. The database: kept from an earlier run unless --reset.
if "$reset"; then
    echo "dropping the old $database (--reset)"
    admin_sql -c "DROP DATABASE IF EXISTS $database WITH (FORCE)"
    rm -rf "$root"
fi
exists="$(admin_sql -c "SELECT 1 FROM pg_database WHERE datname = '$database'")"
if [ "$exists" != 1 ]; then
    echo "creating the database $database"
    admin_sql -c "CREATE DATABASE $database"
fi
mkdir -p "$root"

# Every yuxi-dash command of the platform runs in its own directory (no .env of
# yours is read) against the sample database, with nothing attached itself.
platform() {
    (
        cd "$root"
        for name in $(env | sed -n 's/^\(YUXI_DASH_[A-Z0-9_]*\)=.*/\1/p'); do
            unset "$name"
        done
        export YUXI_DASH_DATABASE_URL="$sample_url"
        export YUXI_DASH_WORKDIR="$root/workdir"
        export YUXI_DASH_FALKORDB_DIR="$root/falkordb"
        "$@"
    )
}

# 2. The platform's threads: our tables, the saver's tables, the demo threads.
# A thread seeded before is never touched again, so a second run adds nothing.
echo "seeding the demo threads (a few minutes the first time)"
platform yuxi-dash db upgrade
platform yuxi-dash demo --no-memory

# 3. The dashboard's login: only SELECT on the three checkpoint tables.
admin_sql <<SQL
DO \$\$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '$reader') THEN
        CREATE ROLE $reader LOGIN;
    END IF;
END
\$\$;
GRANT CONNECT ON DATABASE $database TO $reader;
SQL
psql "$sample_url" -v ON_ERROR_STOP=1 -qAt <<SQL
GRANT USAGE ON SCHEMA public TO $reader;
GRANT SELECT ON checkpoints, checkpoint_blobs, checkpoint_writes TO $reader;
SQL

# 4. The token the dashboard sends to the platform's compress endpoint.
token="$(
    platform env YUXI_DASH_CLI_ROLE=admin \
        yuxi-dash api token create --role operator --actor sample-platform --json |
        python3 -c 'import json, sys; print(json.load(sys.stdin)["token"])'
)"

# 5. What to run in the dashboard's shell.
cat <<EOF

The sample platform is ready. In the dashboard's shell, export:

export YUXI_DASH_ATTACH_CHECKPOINTER=$reader_url
export YUXI_DASH_PLATFORM_URL=http://127.0.0.1:$port
export YUXI_DASH_PLATFORM_TOKEN=$token

Optional, to open the offloaded tool results too:
export YUXI_DASH_ATTACH_WORKDIR=$root/workdir

Then run \`yuxi-dash serve\` (its own default SQLite database) and
\`yuxi-dash attach scan\`. Do not run the dashboard with --demo: its demo
threads have the same ids and would be skipped as conflicts.
(The role has no password: this needs trust or peer login on $server.)

Serving the platform's compress endpoint on port $port (Ctrl-C stops it).
EOF

# 6. The platform's compress endpoint, in the foreground.
platform exec yuxi-dash api serve --port "$port"
