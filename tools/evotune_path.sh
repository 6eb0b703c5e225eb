# Sourced by the shell tools: sets EVOTUNE to the evotune binary ($EVOTUNE,
# else build/evotune) and root to the repository, or exits naming the path.
root=$(cd "$(dirname "${BASH_SOURCE[1]}")/.." && pwd)
EVOTUNE=$(realpath -m "${EVOTUNE:-$root/build/evotune}")
if [ ! -x "$EVOTUNE" ]; then
  echo "$(basename "${BASH_SOURCE[1]}"): no evotune binary at $EVOTUNE (build it with scripts/bootstrap.sh, or set EVOTUNE=/path/to/evotune)" >&2
  exit 2
fi
