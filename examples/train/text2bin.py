#!/usr/bin/env python3
"""text2bin.py TEXT TRAIN.bin VAL.bin -- a text file as byte-level tokens
(token id = byte value, 0..255) in llm.c's .bin format (256 little-endian
int32 header: magic 20240520, version 1, token count; then uint16 tokens),
the first 90% for training and the last 10% for validation.  No
dependencies beyond Python 3's standard library."""
import struct
import sys


def write_bin(path, data):
    with open(path, "wb") as f:
        f.write(struct.pack("<256i", 20240520, 1, len(data), *([0] * 253)))
        f.write(struct.pack("<%dH" % len(data), *data))


def main():
    if len(sys.argv) != 4:
        sys.exit("usage: text2bin.py TEXT TRAIN.bin VAL.bin")
    data = open(sys.argv[1], "rb").read()
    cut = len(data) * 9 // 10
    write_bin(sys.argv[2], data[:cut])
    write_bin(sys.argv[3], data[cut:])
    print("%s: %d train and %d val tokens" % (sys.argv[1], cut, len(data) - cut))


if __name__ == "__main__":
    main()
