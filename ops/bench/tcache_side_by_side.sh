#!/bin/sh
# The scale bench per size with glibc's malloc defaults (scale.py --glibc-defaults) and with
# its per-thread caches off (the deployment default), back to back, the order alternating per
# size, from this tree, MALLOC_ARENA_MAX and GLIBC_TUNABLES unset (the workers cap their arenas at 2 themselves).
#   flock /work/wt/bench.lock ops/bench/tcache_side_by_side.sh [1000 10000 100000 100000]
set -e
HERE=$(cd "$(dirname "$0")/../.." && pwd)
cd "$HERE"
PY=$HERE/.venv/bin/python
SIZES=${*:-1000 10000 100000 100000}
i=0
echo "start $(date -u +%T) $(uptime)"
for n in $SIZES; do
  if [ $((i % 2)) -eq 0 ]; then ORDER="defaults tcache0"; else ORDER="tcache0 defaults"; fi
  i=$((i + 1))
  for arm in $ORDER; do
    echo "== $arm $n $(date -u +%T) $(uptime)"
    if [ "$arm" = defaults ]; then FLAG=--glibc-defaults; else FLAG=; fi
    env -u MALLOC_ARENA_MAX -u GLIBC_TUNABLES "$PY" ops/bench/scale.py --inputs "$n" $FLAG \
      | sed -n '/^| inputs/,/^$/p' | head -3
  done
done
echo "end $(date -u +%T) $(uptime)"
