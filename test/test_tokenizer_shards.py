#!/usr/bin/env python3
"""test_tokenizer_shards.py: the independent side of the shard tools' test. Writes input files
with awkward document boundaries, and for each split rule the documents text_to_shards must
find (NUL-separated, docs_RULE.bin) and the byte-level token stream it must write: 50256 before
each document, then its bytes as GPT-2 byte tokens (expected_RULE.u16, little-endian uint16).

    python3 test/test_tokenizer_shards.py WORK_DIR
"""
import os
import random
import struct
import sys

EOT = 50256


def byte_tokens():
    """GPT-2's bytes_to_unicode order: the token id of each byte value."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    order = bs + [b for b in range(256) if b not in bs]
    return {b: i for i, b in enumerate(order)}


def lines_of(data):
    """Lines with their "\n" (the last one may lack it)."""
    parts = data.split(b"\n")
    lines = [p + b"\n" for p in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines


def body(line):
    """A line without its ending: "\n", or "\r\n"."""
    if line.endswith(b"\r\n"):
        return line[:-2]
    if line.endswith(b"\n"):
        return line[:-1]
    return line


def documents(files, rule, delim=b"%"):
    docs = []
    for data in files:
        if rule == "file":
            docs.append(data)
        elif rule == "line":
            docs.extend(body(l) for l in lines_of(data))
        else:
            current = []
            for l in lines_of(data) + [None]:  # None: the end of the file ends a document
                if l is None or (rule == "blank" and body(l) == b"") or (rule == "delim" and body(l) == delim):
                    doc = b"".join(current)
                    doc = doc[:-2] if doc.endswith(b"\r\n") else doc[:-1] if doc.endswith(b"\n") else doc
                    docs.append(doc)
                    current = []
                else:
                    current.append(l)
    return [d for d in docs if d]


def make_inputs(rng):
    a = ("First paragraph, line one.\nLine two of it.\n\nSecond paragraph.\n%\nafter a percent line\n"
         "%\n%\n\n\nline with CRLF\r\n\r\nafter a CRLF blank\r\n%\r\ncafé 中文 😀 résumé\n% \nnot a separator above\n"
         "<|endoftext|> stays text\nno newline at the end").encode()
    b = "\n\n%\nstarts after blanks\n\n\n\n   \nspaces-only line above is not blank\n\t\nlast".encode()
    words = ["the", "and", "of", "LORD", "é", "中文", "😀", "don't", "1234", "  ", "\t", "x" * 30]
    c_lines = []
    for _ in range(900):
        r = rng.random()
        if r < 0.08:
            c_lines.append("")
        elif r < 0.14:
            c_lines.append("%")
        elif r < 0.17:
            c_lines.append("%\r")
        else:
            c_lines.append(" ".join(rng.choice(words) for _ in range(rng.randint(1, 12))))
    c = ("\n".join(c_lines) + "\n").encode()
    return {"a.txt": a, "b.txt": b, "empty.txt": b"", "c.txt": c}


def main():
    work = sys.argv[1]
    os.makedirs(os.path.join(work, "in"), exist_ok=True)
    files = make_inputs(random.Random(7))
    order = ["a.txt", "empty.txt", "b.txt", "c.txt"]  # the order text_to_shards is given them
    for name, data in files.items():
        with open(os.path.join(work, "in", name), "wb") as f:
            f.write(data)
    tok = byte_tokens()
    for rule in ["file", "line", "blank", "delim"]:
        docs = documents([files[n] for n in order], rule)
        with open(os.path.join(work, f"docs_{rule}.bin"), "wb") as f:
            f.write(b"".join(d + b"\0" for d in docs))
        stream = []
        for d in docs:
            stream.append(EOT)
            stream.extend(tok[x] for x in d)
        with open(os.path.join(work, f"expected_{rule}.u16"), "wb") as f:
            f.write(struct.pack(f"<{len(stream)}H", *stream))
        print(f"{rule} {len(docs)} {len(stream)}")


if __name__ == "__main__":
    main()
