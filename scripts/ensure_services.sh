#!/usr/bin/env bash
# Start the local PostgreSQL and Redis if they are down (the commands from this machine kind's
# notes). With --optional, report and carry on when they cannot be started (the demo then
# falls back to its standalone mode).
set -uo pipefail
optional=0
[[ "${1:-}" == "--optional" ]] && optional=1

pg_up() { pg_isready -q -h 127.0.0.1 -p 5432 2>/dev/null; }
redis_up() { redis-cli -h 127.0.0.1 -p 6379 ping 2>/dev/null | grep -q PONG; }

if ! pg_up && command -v pg_ctlcluster >/dev/null; then
  echo "starting PostgreSQL"
  pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -1)" main start || true
  for _ in $(seq 1 30); do pg_up && break; sleep 1; done
fi
if ! redis_up && command -v redis-server >/dev/null; then
  echo "starting Redis"
  mkdir -p /var/lib/redis /var/log/redis
  redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no \
    --dir /var/lib/redis --logfile /var/log/redis/ci.log || true
  for _ in $(seq 1 30); do redis_up && break; sleep 1; done
fi

status=0
pg_up && echo "PostgreSQL: up" || { echo "PostgreSQL: DOWN"; status=1; }
redis_up && echo "Redis: up" || { echo "Redis: DOWN"; status=1; }
if (( status )) && (( optional )); then exit 0; fi
exit $status
