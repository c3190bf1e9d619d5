"""Lower an ELF object's glibc version requirements to ones glibc 2.31 provides.

The pyenv Python 3.7 on this machine was built against glibc 2.36. A few of its extension
modules ask for symbols at versions newer than 2.31 (math/cmath: hypot@GLIBC_2.35;
_ctypes: dl*@GLIBC_2.34; _multiprocessing: sem_*@GLIBC_2.34) although glibc 2.31 has the
same functions under GLIBC_2.2.5 (in libm, libdl, libpthread). This rewrites each such
entry of `.gnu.version_r` (name offset and hash) to GLIBC_2.2.5 in place, when the object's
dynamic string table already holds that name. Used by images/ngc/py37.sh; the image build
then imports the patched modules inside the bullseye rootfs to prove they load.

Usage: python3 elf_glibc_compat.py FILE...   (prints one line per rewritten entry)
"""
import struct
import sys

TARGET = b"GLIBC_2.2.5"
SHT_GNU_VERNEED = 0x6FFFFFFE


def elf_hash(name):
    h = 0
    for c in name:
        h = ((h << 4) + c) & 0xFFFFFFFF
        g = h & 0xF0000000
        if g:
            h ^= g >> 24
        h &= ~g & 0xFFFFFFFF
    return h


def too_new(name):
    if not name.startswith(b"GLIBC_2."):
        return False
    try:
        parts = [int(p) for p in name[len(b"GLIBC_"):].split(b".")]
    except ValueError:
        return False
    return parts[:2] > [2, 31]


def patch(path):
    data = bytearray(open(path, "rb").read())
    if data[:4] != b"\x7fELF" or data[4] != 2:
        return 0
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
    sections = []
    for i in range(shnum):
        off = shoff + i * shentsize
        _name, stype, _flags, _addr, offset, size, link, info = struct.unpack_from(
            "<IIQQQQII", data, off)
        sections.append((stype, offset, size, link, info))
    changed = 0
    for stype, offset, _size, link, info in sections:
        if stype != SHT_GNU_VERNEED:
            continue
        stroff = sections[link][1]
        strsize = sections[link][2]
        strtab = bytes(data[stroff:stroff + strsize])
        target_at = strtab.find(b"\0" + TARGET + b"\0")
        if target_at < 0:
            continue
        target_off = target_at + 1
        entry = offset
        for _ in range(info):
            _ver, cnt, _file, aux, nxt = struct.unpack_from("<HHIII", data, entry)
            a = entry + aux
            for _ in range(cnt):
                _h, flags, other, name_off, anext = struct.unpack_from("<IHHII", data, a)
                name = strtab[name_off:strtab.index(b"\0", name_off)]
                if too_new(name):
                    struct.pack_into("<IHHII", data, a, elf_hash(TARGET), flags, other,
                                     target_off, anext)
                    print("%s: %s -> %s" % (path, name.decode(), TARGET.decode()))
                    changed += 1
                a += anext
            if not nxt:
                break
            entry += nxt
    if changed:
        open(path, "wb").write(bytes(data))
    return changed


if __name__ == "__main__":
    for p in sys.argv[1:]:
        patch(p)
