"""A small reader of ELF64 little-endian files and of MessagePack, enough to check AMD code objects (HSACO) without a
GPU: sections, symbols, program headers, notes, and the `amdhsa.kernels` metadata note (MessagePack).

Facts used (the ELF gABI, the MessagePack spec, the AMDGPU code object format): a note is (namesz, descsz, type, name
padded to 4, desc padded to 4); AMD's metadata note has name "AMDGPU" and type NT_AMDGPU_METADATA (32)."""
from __future__ import annotations
import struct
from dataclasses import dataclass
from typing import Any

class ELFError(ValueError):
  """The bytes are not the ELF file (or MessagePack) the reader expects: the message says which field and where."""

@dataclass(frozen=True)
class Section:
  name: str
  type: int
  flags: int
  addr: int
  offset: int
  size: int
  link: int
  entsize: int

@dataclass(frozen=True)
class Symbol:
  name: str
  value: int
  size: int
  bind: int     # STB_LOCAL 0, STB_GLOBAL 1, STB_WEAK 2
  type: int     # STT_OBJECT 1, STT_FUNC 2
  shndx: int

@dataclass(frozen=True)
class Segment:
  type: int     # PT_LOAD 1, PT_DYNAMIC 2, PT_NOTE 4
  flags: int
  offset: int
  vaddr: int
  filesz: int
  memsz: int

SHT_SYMTAB, SHT_NOTE, SHT_DYNSYM = 2, 7, 11
ET_REL, ET_DYN = 1, 3
EM_AMDGPU = 224
NT_AMDGPU_METADATA = 32

class ELF:
  """An ELF64 little-endian file: header fields, sections, segments, symbols (symtab and dynsym), notes."""
  def __init__(self, data: bytes):
    if data[:4] != b"\x7fELF": raise ELFError(f"not an ELF file (magic {data[:4]!r})")
    if data[4] != 2 or data[5] != 1:
      raise ELFError(f"only ELF64 little-endian is read (class {data[4]}, data {data[5]})")
    self.data = data
    self.osabi, self.abiversion = data[7], data[8]
    (self.type, self.machine, _, self.entry, self.phoff, self.shoff, self.flags, _, phentsize, phnum, shentsize, shnum,
     shstrndx) = struct.unpack_from("<HHIQQQIHHHHHH", data, 16)
    if shnum and shentsize != 64: raise ELFError(f"section header size {shentsize}, expected 64")
    raw = [struct.unpack_from("<IIQQQQIIQQ", data, self.shoff + i * 64) for i in range(shnum)]
    strtab = raw[shstrndx] if shnum else None
    self.sections = [Section(self._str(strtab[4], s[0]) if strtab else "", s[1], s[2], s[3], s[4], s[5], s[6], s[9])
                     for s in raw]
    phdrs = [struct.unpack_from("<IIQQQQQQ", data, self.phoff + i * phentsize) for i in range(phnum)]
    self.segments = [Segment(p[0], p[1], p[2], p[3], p[5], p[6]) for p in phdrs]

  def _str(self, off: int, idx: int) -> str:
    end = self.data.index(b"\0", off + idx)
    return self.data[off + idx:end].decode()

  def section(self, name: str) -> Section:
    for s in self.sections:
      if s.name == name: return s
    raise ELFError(f"no section {name!r}; sections are {[s.name for s in self.sections]}")

  def symbols(self, dynamic: bool = False) -> list[Symbol]:
    """The symbols of .symtab (or .dynsym: what a loader sees)."""
    want = SHT_DYNSYM if dynamic else SHT_SYMTAB
    ret = []
    for s in self.sections:
      if s.type != want: continue
      strs = self.sections[s.link]
      for i in range(1, s.size // 24):
        name, info, _, shndx, value, size = struct.unpack_from("<IBBHQQ", self.data, s.offset + i * 24)
        ret.append(Symbol(self._str(strs.offset, name), value, size, info >> 4, info & 0xF, shndx))
    return ret

  def symbol(self, name: str, dynamic: bool = False) -> Symbol:
    for s in self.symbols(dynamic):
      if s.name == name: return s
    raise ELFError(f"no {'dynamic ' if dynamic else ''}symbol {name!r}")

  def notes(self) -> list[tuple[str, int, bytes]]:
    """(name, type, desc) of every note in the SHT_NOTE sections."""
    ret = []
    for s in self.sections:
      if s.type != SHT_NOTE: continue
      off, end = s.offset, s.offset + s.size
      while off + 12 <= end:
        namesz, descsz, ntype = struct.unpack_from("<III", self.data, off)
        name = self.data[off + 12:off + 12 + namesz].rstrip(b"\0").decode()
        doff = off + 12 + _pad4(namesz)
        ret.append((name, ntype, self.data[doff:doff + descsz]))
        off = doff + _pad4(descsz)
    return ret

  def read(self, vaddr: int, size: int) -> bytes:
    """`size` bytes at virtual address `vaddr` (through the section that holds it)."""
    for s in self.sections:
      if s.addr <= vaddr and vaddr + size <= s.addr + s.size and s.type != 8:  # not SHT_NOBITS
        return self.data[s.offset + vaddr - s.addr:s.offset + vaddr - s.addr + size]
    raise ELFError(f"no section holds bytes [{vaddr:#x}, {vaddr + size:#x})")

def _pad4(n: int) -> int: return (n + 3) & ~3

# ---- MessagePack ----

def unpack_msgpack(data: bytes) -> Any:
  """One MessagePack value (maps, arrays, strings, binaries, ints, floats, bools, nil); trailing bytes are an error."""
  val, off = _unpack(data, 0)
  if off != len(data): raise ELFError(f"msgpack: {len(data) - off} bytes after the value")
  return val

def _unpack(d: bytes, o: int) -> tuple[Any, int]:
  if o >= len(d): raise ELFError(f"msgpack: truncated at byte {o}")
  b = d[o]
  if b <= 0x7F: return b, o + 1
  if b >= 0xE0: return b - 0x100, o + 1
  if 0x80 <= b <= 0x8F: return _map(d, o + 1, b & 0xF)
  if 0x90 <= b <= 0x9F: return _array(d, o + 1, b & 0xF)
  if 0xA0 <= b <= 0xBF: return _str(d, o + 1, b & 0x1F)
  if b == 0xC0: return None, o + 1
  if b in (0xC2, 0xC3): return b == 0xC3, o + 1
  fixed = {0xCC: "B", 0xCD: ">H", 0xCE: ">I", 0xCF: ">Q", 0xD0: "b", 0xD1: ">h", 0xD2: ">i", 0xD3: ">q", 0xCA: ">f",
           0xCB: ">d"}
  if b in fixed:
    v = struct.unpack_from(fixed[b], d, o + 1)[0]
    return v, o + 1 + struct.calcsize(fixed[b])
  lens = {0xD9: "B", 0xDA: ">H", 0xDB: ">I", 0xC4: "B", 0xC5: ">H", 0xC6: ">I", 0xDC: ">H", 0xDD: ">I", 0xDE: ">H",
          0xDF: ">I"}
  if b in lens:
    n = struct.unpack_from(lens[b], d, o + 1)[0]
    o2 = o + 1 + struct.calcsize(lens[b])
    if b in (0xD9, 0xDA, 0xDB): return _str(d, o2, n)
    if b in (0xC4, 0xC5, 0xC6): return d[o2:o2 + n], o2 + n
    return _array(d, o2, n) if b in (0xDC, 0xDD) else _map(d, o2, n)
  raise ELFError(f"msgpack: type byte {b:#x} at {o} is not read (extension types are not used by AMD metadata)")

def _str(d: bytes, o: int, n: int) -> tuple[str, int]:
  if o + n > len(d): raise ELFError(f"msgpack: string of {n} bytes at {o} runs past the end")
  return d[o:o + n].decode(), o + n

def _array(d: bytes, o: int, n: int) -> tuple[list[Any], int]:
  ret = []
  for _ in range(n):
    v, o = _unpack(d, o)
    ret.append(v)
  return ret, o

def _map(d: bytes, o: int, n: int) -> tuple[dict[Any, Any], int]:
  ret = {}
  for _ in range(n):
    k, o = _unpack(d, o)
    v, o = _unpack(d, o)
    ret[k] = v
  return ret, o

__all__ = ["ELF", "ELFError", "Section", "Symbol", "Segment", "unpack_msgpack", "NT_AMDGPU_METADATA", "EM_AMDGPU",
           "ET_DYN", "ET_REL"]
