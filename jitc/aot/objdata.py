"""Writing the library's object file with its large constants (the weights) added as one more
section, streamed from the arrays.

The code generator only declares those constants (hidden, undefined symbols; see
`ExternalConstants`). Here the ELF object LLVM emitted is copied with a read-only section
appended after it, holding each array's bytes at a 64-byte aligned offset; the declared symbols
are then defined in place to point there. Each array is written to the file straight from its
buffer (in the target's byte order): no IR text, no LLVM constant, no second copy in memory, and
no assembler or linker is needed, so `.o` and `.a` outputs for other targets work as before.
"""

from __future__ import annotations

import struct
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import BinaryIO

import numpy as np

from jitc.backends.cpu.plan import ALIGNMENT

SECTION_NAME = b".rodata.jitc_constants"
NON_ELF_SYSTEMS = ("darwin", "macos", "ios", "windows", "win32", "mingw", "cygwin", "uefi")

# ELF64 structures (the fields this module reads or writes).
_HEADER = "16sHHIQQQIHHHHHH"            # Elf64_Ehdr
_SECTION = "IIQQQQIIQQ"                 # Elf64_Shdr
_SYMBOL = "IBBHQQ"                      # Elf64_Sym
_SHT_PROGBITS, _SHT_SYMTAB, _SHF_ALLOC, _STT_OBJECT = 1, 2, 2, 1
_SHN_UNDEF, _SHN_LORESERVE = 0, 0xFF00


def writes_elf(triple: str) -> bool:
    """Whether LLVM writes ELF objects for `triple`; only those get the streamed section."""
    return not triple.startswith("wasm") and not any(s in triple for s in NON_ELF_SYSTEMS)


def _align(n: int, to: int) -> int:
    return -(-n // to) * to


class ObjectFormatError(ValueError):
    pass


def write_object(path: Path, code: bytes, constants: Sequence[tuple[str, np.ndarray]]) -> None:
    """Write the ELF64 relocatable object `code` to `path`, with `constants` (symbol, array)
    defined in a new section. A constant whose symbol the object does not use (the optimizer
    dropped its only reference) is left out."""
    if not constants:
        path.write_bytes(code)
        return
    image = bytearray(code)
    if image[:4] != b"\x7fELF" or image[4] != 2 or image[5] not in (1, 2):
        raise ObjectFormatError("the object file is not 64-bit ELF")
    order = "<" if image[5] == 1 else ">"
    header = list(struct.unpack_from(order + _HEADER, image))
    shoff, shentsize, shnum, shstrndx = header[6], header[11], header[12], header[13]
    if shentsize != struct.calcsize(_SECTION) or shnum == 0 or shnum + 1 >= _SHN_LORESERVE \
            or shstrndx >= _SHN_LORESERVE:
        raise ObjectFormatError("the object file uses extended section numbering")
    sections = [list(struct.unpack_from(order + _SECTION, image, shoff + i * shentsize))
                for i in range(shnum)]
    new_index = shnum
    placed = _define_symbols(image, order, sections, new_index, constants)

    data_offset = _align(len(image), ALIGNMENT)
    data_size = max((offset + array.nbytes for _, array, offset in placed), default=0)
    names = sections[shstrndx]
    old_names = bytes(image[names[4]:names[4] + names[5]])
    names_offset = data_offset + data_size
    table = old_names + SECTION_NAME + b"\0"
    names[4], names[5] = names_offset, len(table)  # the names move to the end, one added
    table_offset = _align(names_offset + len(table), 8)
    sections.append([len(old_names), _SHT_PROGBITS, _SHF_ALLOC, 0, data_offset, data_size,
                     0, 0, ALIGNMENT, 0])
    header[6], header[12] = table_offset, len(sections)
    struct.pack_into(order + _HEADER, image, 0, *header)

    swap = (order == "<") != (sys.byteorder == "little")
    with path.open("wb") as out:
        out.write(image)
        at = _pad(out, len(image), data_offset)
        for _, array, offset in placed:
            at = _pad(out, at, data_offset + offset)
            at += _write_array(out, array, swap)
        at = _pad(out, at, names_offset)
        out.write(table)
        _pad(out, names_offset + len(table), table_offset)
        for section in sections:
            out.write(struct.pack(order + _SECTION, *section))


def _define_symbols(image: bytearray, order: str, sections: list[list[int]], index: int,
                    constants: Sequence[tuple[str, np.ndarray]]
                    ) -> list[tuple[str, np.ndarray, int]]:
    """Turn the undefined symbols named in `constants` into objects of section `index`; the
    constants placed, with their offsets in that section, in section order."""
    symtab = next((s for s in sections if s[1] == _SHT_SYMTAB), None)
    if symtab is None:
        return []
    strtab = sections[symtab[6]]
    strings = bytes(image[strtab[4]:strtab[4] + strtab[5]])
    undefined: dict[bytes, int] = {}
    size = struct.calcsize(_SYMBOL)
    for at in range(symtab[4], symtab[4] + symtab[5], size):
        name, _, _, shndx, _, _ = struct.unpack_from(order + _SYMBOL, image, at)
        if shndx == _SHN_UNDEF and name:
            undefined[strings[name:strings.index(b"\0", name)]] = at
    placed, offset = [], 0
    for symbol, array in constants:
        at = undefined.get(symbol.encode())
        if at is None:
            continue
        offset = _align(offset, ALIGNMENT)
        name, info, other, _, _, _ = struct.unpack_from(order + _SYMBOL, image, at)
        struct.pack_into(order + _SYMBOL, image, at, name, (info & 0xF0) | _STT_OBJECT, other,
                         index, offset, array.nbytes)
        placed.append((symbol, array, offset))
        offset += array.nbytes
    return placed


def _pad(out: BinaryIO, at: int, to: int) -> int:
    out.write(bytes(to - at))
    return to


def _write_array(out: BinaryIO, array: np.ndarray, swap: bool) -> int:
    flat = np.ascontiguousarray(array).reshape(-1)  # a copy only for a strided array
    if swap and flat.dtype.itemsize > 1:
        flat = flat.byteswap()
    out.write(flat.view(np.uint8).data)
    return flat.nbytes
