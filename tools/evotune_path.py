"""Where the Python tools find the evotune binary: --evotune, else $EVOTUNE,
else build/evotune; an error naming the path when it is not there."""
import os

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))


def evotune_binary(path):
    path = path or os.environ.get("EVOTUNE") or os.path.join(ROOT, "build", "evotune")
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        raise SystemExit(f"no evotune binary at {path} (build it with scripts/bootstrap.sh, or pass --evotune PATH "
                         "or set EVOTUNE)")
    return path
