#!/usr/bin/env python3
"""Prints, from a `cargo test` log, what each failing test printed: libtest's
`---- name stdout ----` sections and trybuild's mismatching cases (EXPECTED / ACTUAL blocks).
scripts/test calls it last when tests failed, so the end of a CI log says why."""
import re
import sys

ANSI = re.compile(r"\x1b\[[0-9;]*m")
lines = [ANSI.sub("", line.rstrip("\n")) for line in open(sys.argv[1], errors="replace")]
out, limit = [], int(sys.argv[2]) if len(sys.argv) > 2 else 400

i = 0
while i < len(lines):
    line = lines[i]
    # trybuild: "test ui/fail/x.rs ... mismatch" (or "error", "should fail to compile") up to the next case.
    if re.match(r"^test \S+\.rs \.\.\. (?!ok$)", line):
        block = [line]
        i += 1
        while i < len(lines) and not re.match(r"^test \S+\.rs \.\.\. ", lines[i]) and not lines[i].startswith("test result:"):
            block.append(lines[i])
            i += 1
        out.extend(block[:limit])
        continue
    # libtest: "---- name stdout ----" up to the next section or the list of failures.
    if line.startswith("---- ") and line.endswith(" ----"):
        block = [line]
        i += 1
        while i < len(lines) and not lines[i].startswith("---- ") and lines[i] != "failures:":
            if not re.match(r"^\s+(\d+: |at /rustc/|at /root/\.cargo/)", lines[i]):  # drop std/tokio frames
                block.append(lines[i])
            i += 1
        out.extend(block[:limit])
        continue
    # Anything else reported as an error (a build that failed, trybuild's dependencies, a linker),
    # with what follows it.
    if re.match(r"^error(\[E\d+\])?: ", line):
        if "test failed, to rerun" in line:
            out.append(line)
        else:
            out.extend(lines[i : i + 20])
            i += 20
            continue
    i += 1

# Tests that reported "has been running for over 60 seconds" and never finished (the run was
# stopped by the time guard, or hangs): name them, they are the likely cause.
started = {m.group(1) for l in lines if (m := re.match(r"^test (\S+) has been running for over", l))}
finished = {m.group(1) for l in lines if (m := re.match(r"^test (\S+) \.\.\. ", l))}
unfinished = sorted(started - finished)
if unfinished:
    out.append("tests still running when the log ends:")
    out.extend("    " + name for name in unfinished)

print("\n".join(out) if out else "(no failing test's output found in the log)")
