#!/usr/bin/env python3
"""ckfile.py: the project's checkpoint checksum (common/util.c) in Python, so tests can write files
whose fields are wrong but whose checksum is right, and reach the checks behind it.

  ckfile.py sum FILE                  prints the checksum a reader computes for FILE (hex)
  ckfile.py set FILE OFFSET FMT VAL   writes VAL (struct format FMT, e.g. <i or <q) at OFFSET and
                                      re-seals the file's checksum (header words 13-14)
  ckfile.py reseal FILE               recomputes and stores the checksum
"""
import struct
import sys

M64 = (1 << 64) - 1
GOLD, M1, M2 = 0x9E3779B97F4A7C15, 0xBF58476D1CE4E5B9, 0x94D049BB133111EB


def _round(acc, w):
    x = acc ^ ((w * M1) & M64)
    x = ((x << 29) | (x >> 35)) & M64
    return (x * M2) & M64


def checksum(data):
    lanes = [(GOLD * (i + 1)) & M64 for i in range(4)]
    full = len(data) // 32 * 32
    for w0, w1, w2, w3 in struct.iter_unpack("<4Q", data[:full]):
        lanes = [_round(lanes[0], w0), _round(lanes[1], w1), _round(lanes[2], w2), _round(lanes[3], w3)]
    h = (len(data) * GOLD) & M64
    for lane in lanes:
        h = _round(h, lane)
    tail = data[full:]
    i = 0
    while i + 8 <= len(tail):
        h = _round(h, struct.unpack_from("<Q", tail, i)[0])
        i += 8
    for b in tail[i:]:
        h = _round(h, b | 0x100)
    h ^= h >> 31
    h = (h * M1) & M64
    h ^= h >> 27
    h = (h * M2) & M64
    return h ^ (h >> 31)


def file_checksum(data):
    """The checksum of a checkpoint file: header words 13 and 14 read as zero."""
    return checksum(data[:52] + b"\0" * 8 + data[60:])


def reseal(data):
    s = file_checksum(data)
    return data[:52] + struct.pack("<II", s & 0xFFFFFFFF, s >> 32) + data[60:]


def main():
    cmd, path = sys.argv[1], sys.argv[2]
    data = open(path, "rb").read()
    if cmd == "sum":
        print("%016x" % file_checksum(data))
        return
    if cmd == "set":
        off, fmt, val = int(sys.argv[3]), sys.argv[4], sys.argv[5]
        v = float(val) if fmt[-1] in "fd" else int(val, 0)
        data = data[:off] + struct.pack(fmt, v) + data[off + struct.calcsize(fmt):]
    data = reseal(data)
    open(path, "wb").write(data)


if __name__ == "__main__":
    main()
