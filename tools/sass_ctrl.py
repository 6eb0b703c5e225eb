#!/usr/bin/env python3
"""SASS with each instruction's scheduling control bits: stall cycles, yield,
the scoreboards it sets for its result and its operands, and those it waits on.

What ptxas decided about ordering, which the plain listing hides: whether an
instruction waits for an earlier load's result (its scoreboard in `wait`), how
many cycles it holds its warp (`st`). For example, an mbarrier arrival right
after `ldmatrix` loads, with no wait on their scoreboards, means the hardware
is trusted to order them; a `WARPGROUP.DEPBAR` placed before a softmax the
source put after it shows up in the order of the lines.

Needs:  no GPU. Python 3. cuobjdump -sass output on stdin (its hex words
        carry the bits), e.g. from tools/sass.sh.
Run:    tools/sass.sh CONFIG [SHAPE] | tools/sass_ctrl.py [START END]
          KERNEL=sdpa_fwd_sm90 DTYPE=fp16 tools/sass.sh 'BLOCK_N=128' 16,32,512,64 | tools/sass_ctrl.py 1100 1300
        START and END: hexadecimal instruction addresses (inclusive), as
        cuobjdump prints them; default the whole listing.
Prints: one line per instruction: address, instruction, st (stall cycles),
        y (yield flag), wsb (scoreboard set when the result is written, - for
        none), rsb (set when the operands have been read), wait (scoreboards
        waited on before issue). The bit positions are those of the Volta to
        Hopper encoding as public reverse-engineering documents it (the high
        64-bit word: stall 41-44, yield 45, write 46-48, read 49-51, wait
        mask 52-57), not an NVIDIA specification.
"""
import re
import sys


def main():
    args = sys.argv[1:]
    if args and args[0] in ("-h", "--help"):
        print(__doc__)
        return 0
    if len(args) not in (0, 2):
        print("usage: tools/sass_ctrl.py [START END] < cuobjdump-sass-output", file=sys.stderr)
        return 2
    try:
        lo, hi = (int(args[0], 16), int(args[1], 16)) if args else (0, 1 << 62)
    except ValueError:
        print("sass_ctrl.py: START and END are hexadecimal addresses, e.g. 1100 1300", file=sys.stderr)
        return 2
    inst = re.compile(r"^\s+/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;\s+/\* (0x[0-9a-f]{16}) \*/")
    word = re.compile(r"^\s+/\* (0x[0-9a-f]{16}) \*/")
    pending = None  # (address, text) of an instruction whose high word comes next
    printed = 0
    for line in sys.stdin:
        if line.lstrip().startswith("Function :"):
            print(line.strip())
            continue
        m = inst.match(line)
        if m:
            pending = (int(m.group(1), 16), m.group(2))
            continue
        w = word.match(line)
        if w and pending:
            addr, text = pending
            pending = None
            if not lo <= addr <= hi:
                continue
            h = int(w.group(1), 16)
            stall, yld = (h >> 41) & 0xF, (h >> 45) & 1
            wsb, rsb, mask = (h >> 46) & 7, (h >> 49) & 7, (h >> 52) & 0x3F
            waits = "".join(str(k) for k in range(6) if mask >> k & 1) or "-"
            print("%05x  %-64s st=%2d y=%d wsb=%s rsb=%s wait=%s" %
                  (addr, text[:64], stall, yld, "-" if wsb == 7 else wsb, "-" if rsb == 7 else rsb, waits))
            printed += 1
    if printed == 0:
        print("sass_ctrl.py: no instructions read (is stdin cuobjdump -sass output, and the range right?)",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
