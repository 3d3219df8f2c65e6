"""Matrix files as a careless or hostile user writes them: mutations of a real one.

Shared by the property test (tests/matrix/test_fuzz.py) and bench/fuzz_matrix.py."""

from __future__ import annotations

import random

#: What tends to break YAML readers: structure, aliases, merges, tags, numbers out of any
#: range, control characters, non-UTF-8 bytes, deep nesting, alias bombs, long values.
PAYLOADS: tuple[bytes, ...] = (
    b":", b"- ", b"[", b"]", b"{", b"}", b"&a ", b"*a", b"<<: *a\n", b"!!python/object:os.system",
    b"!!binary AAAA", b"\t", b"\n", b"\n  ", b"'", b'"', b"#", b"~", b"null", b"true", b"1e400",
    b"9" * 400, b"-1", b"0", b"\x00", b"\x1b[31m", b"\xff\xfe", b"\xc3\x28", "é".encode(),
    b"[" * 600 + b"]" * 600, b"a: &x [*x]\n", b"x" * 5000,
    b"a: &a [1,1,1,1,1,1,1,1,1]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\n"
    b"c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\nd: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]\n"
    b"e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]\nf: [*e,*e,*e,*e,*e,*e,*e,*e,*e]\n",
    b"cases_dir: /nonexistent\n", b"cases_dir: \"a\\0b\"\n", b"timeout: 1e999\n",
    b"    axes: {a: [" + b",".join(b'"%d"' % i for i in range(400)) + b"], b: ["
    + b",".join(b'"%d"' % i for i in range(400)) + b"]}\n",
)


def mutate(text: bytes, rng: random.Random, edits: int | None = None) -> bytes:
    """``text`` after 1-4 random edits: insert, replace or delete a span, or duplicate a line."""
    data = bytearray(text)
    for _ in range(edits or rng.randint(1, 4)):
        op = rng.choice(("insert", "replace", "delete", "duplicate"))
        at = rng.randrange(len(data) + 1)
        if op == "insert":
            data[at:at] = rng.choice(PAYLOADS)
        elif op == "replace":
            data[at:at + rng.randint(1, 40)] = rng.choice(PAYLOADS)
        elif op == "delete":
            del data[at:at + rng.randint(1, 200)]
        else:
            start = data.rfind(b"\n", 0, at) + 1
            end = data.find(b"\n", at)
            line = data[start:end if end != -1 else len(data)]
            data[start:start] = line + b"\n"
    return bytes(data)
