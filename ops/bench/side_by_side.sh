#!/bin/sh
# The scale bench of main (a `git archive` tree at $MAIN_TREE) and of this worktree, one
# after the other, each run from its own tree (PYTHONPATH = that tree) with the memory
# probe (ops/bench/memprobe) loaded into the workers, MALLOC_ARENA_MAX unset.
#   flock /work/wt/bench.lock ops/bench/side_by_side.sh "--with-100k" TAG [main mem]
# Probe lines land in /tmp/p-TAG-main and /tmp/p-TAG-mem.
set -e
N="$1"; TAG="$2"; ORDER="${3:-main mem}"
HERE=$(cd "$(dirname "$0")/../.." && pwd)
MAIN_TREE=${MAIN_TREE:-/tmp/main73-mem}
PY=$HERE/.venv/bin/python
echo "start $(date -u +%T) $(uptime)"
for code in $ORDER; do
  rm -rf "/tmp/p-$TAG-$code"; mkdir -p "/tmp/p-$TAG-$code"
  if [ "$code" = main ]; then ROOT=$MAIN_TREE; else ROOT=$HERE; fi
  echo "== $code $(date -u +%T) $(uptime)"
  cd "$ROOT"
  env -u MALLOC_ARENA_MAX PYTHONPATH="$ROOT:$HERE/ops/bench/memprobe" \
    MEMPROBE_DIR="/tmp/p-$TAG-$code" MEMPROBE_EVERY=5 "$PY" ops/bench/scale.py $N
done
echo "end $(date -u +%T) $(uptime)"
