"""Minimal, self-contained safetensors reader for the float64 reference.

Written from the safetensors file-format description only (no shared code with the C++
engine):

    [8 bytes]  N = header length, unsigned 64-bit little endian
    [N bytes]  UTF-8 JSON header: {"__metadata__": {...}, "<name>": {"dtype": "F32",
               "shape": [..], "data_offsets": [begin, end]}, ...}
    [rest]     data section; data_offsets are byte offsets relative to its start.

Supported dtypes: F64, F32, F16, BF16, F8_E4M3, and the integer types (I8/U8/I16/I32/I64).
Floating tensors are returned as float64 numpy arrays by `get_f64`; `get_raw` returns the
stored values in their natural numpy dtype (F8_E4M3 as uint8 bytes, BF16 as uint16 bits).

Also handles a checkpoint *directory*: either a single `model.safetensors` or a sharded one
described by `model.safetensors.index.json` ({"weight_map": {name: shard_file}}).
"""

import json
import os
import struct

import numpy as np

__all__ = [
    "SafetensorsError",
    "FP8_E4M3_TABLE",
    "fp8_e4m3_to_f64",
    "bf16_bits_to_f64",
    "SafetensorsFile",
    "Checkpoint",
]


def _build_fp8_e4m3fn_table():
    """float8_e4m3fn: 1 sign bit, 4 exponent bits (bias 7), 3 mantissa bits, no infinities.

    exponent == 0       : subnormal, value = m * 2^-9   (= m/8 * 2^(1-7))
    exponent in 1..15   : normal,    value = (1 + m/8) * 2^(e-7)
    0x7f / 0xff         : NaN (exponent 15, mantissa 7); everything else in e==15 is finite
                          (max finite magnitude 0x7e = 1.75 * 2^8 = 448).
    """
    table = np.empty(256, dtype=np.float64)
    for b in range(256):
        sign = -1.0 if (b & 0x80) else 1.0
        e = (b >> 3) & 0xF
        m = b & 0x7
        if e == 0xF and m == 0x7:
            v = float("nan")
        elif e == 0:
            v = m * 2.0 ** -9
        else:
            v = (1.0 + m / 8.0) * 2.0 ** (e - 7)
        table[b] = sign * v
    table.setflags(write=False)
    return table


FP8_E4M3_TABLE = _build_fp8_e4m3fn_table()


def fp8_e4m3_to_f64(raw_u8):
    """Decode an array of float8_e4m3fn bytes (uint8) to float64."""
    return FP8_E4M3_TABLE[np.asarray(raw_u8, dtype=np.uint8)]


def bf16_bits_to_f64(raw_u16):
    """BF16 is the top half of an IEEE float32: (bits << 16) viewed as float32 (exact)."""
    bits32 = np.asarray(raw_u16, dtype=np.uint16).astype(np.uint32) << np.uint32(16)
    return bits32.view(np.float32).astype(np.float64)


# dtype tag -> (numpy storage dtype, bytes per element)
_STORAGE = {
    "F64": (np.dtype("<f8"), 8),
    "F32": (np.dtype("<f4"), 4),
    "F16": (np.dtype("<f2"), 2),
    "BF16": (np.dtype("<u2"), 2),
    "F8_E4M3": (np.dtype("u1"), 1),
    "I64": (np.dtype("<i8"), 8),
    "I32": (np.dtype("<i4"), 4),
    "I16": (np.dtype("<i2"), 2),
    "I8": (np.dtype("i1"), 1),
    "U8": (np.dtype("u1"), 1),
    "BOOL": (np.dtype("u1"), 1),
}


class SafetensorsError(Exception):
    pass


class SafetensorsFile:
    """One .safetensors file. Tensors are read lazily (one np.fromfile-style read each)."""

    def __init__(self, path):
        self.path = path
        with open(path, "rb") as f:
            head = f.read(8)
            if len(head) != 8:
                raise SafetensorsError(f"{path}: file shorter than 8 bytes")
            (n,) = struct.unpack("<Q", head)
            fsize = os.fstat(f.fileno()).st_size
            if n > fsize - 8:
                raise SafetensorsError(f"{path}: header length {n} exceeds file size {fsize}")
            try:
                header = json.loads(f.read(n).decode("utf-8"))
            except (UnicodeDecodeError, json.JSONDecodeError) as e:
                raise SafetensorsError(f"{path}: bad JSON header: {e}") from None
        self.data_start = 8 + n
        self.data_size = fsize - self.data_start
        self.metadata = header.pop("__metadata__", None) or {}
        self.entries = {}
        for name, info in header.items():
            dt = info.get("dtype")
            if dt not in _STORAGE:
                raise SafetensorsError(f"{path}: tensor {name}: unsupported dtype {dt!r}")
            shape = tuple(int(s) for s in info["shape"])
            begin, end = (int(x) for x in info["data_offsets"])
            count = 1
            for s in shape:
                count *= s
            nbytes = count * _STORAGE[dt][1]
            if not (0 <= begin <= end <= self.data_size) or end - begin != nbytes:
                raise SafetensorsError(
                    f"{path}: tensor {name}: data_offsets [{begin},{end}) inconsistent with "
                    f"dtype {dt} shape {list(shape)} / data size {self.data_size}")
            self.entries[name] = (dt, shape, begin, end)

    def keys(self):
        return list(self.entries)

    def __contains__(self, name):
        return name in self.entries

    def dtype(self, name):
        return self.entries[name][0]

    def shape(self, name):
        return self.entries[name][1]

    def get_raw(self, name):
        dt, shape, begin, end = self.entries[name]
        npdt, _ = _STORAGE[dt]
        with open(self.path, "rb") as f:
            f.seek(self.data_start + begin)
            buf = f.read(end - begin)
        if len(buf) != end - begin:
            raise SafetensorsError(f"{self.path}: tensor {name}: short read")
        return np.frombuffer(buf, dtype=npdt).reshape(shape)

    def get_f64(self, name):
        dt = self.entries[name][0]
        raw = self.get_raw(name)
        if dt == "BF16":
            return bf16_bits_to_f64(raw)
        if dt == "F8_E4M3":
            return fp8_e4m3_to_f64(raw)
        return raw.astype(np.float64)


class Checkpoint:
    """A model directory: `model.safetensors` or `model.safetensors.index.json` + shards.
    A path to a single .safetensors file is accepted too."""

    def __init__(self, path):
        self.files = {}  # shard filename -> SafetensorsFile
        self.where = {}  # tensor name -> SafetensorsFile
        if os.path.isfile(path):
            self._add(path)
            return
        index = os.path.join(path, "model.safetensors.index.json")
        single = os.path.join(path, "model.safetensors")
        if os.path.isfile(index):
            with open(index) as f:
                wmap = json.load(f).get("weight_map")
            if not isinstance(wmap, dict):
                raise SafetensorsError(f"{index}: no weight_map")
            for shard in sorted(set(wmap.values())):
                self._add(os.path.join(path, shard))
            for name, shard in wmap.items():
                sf = self.files[shard]
                if name not in sf:
                    raise SafetensorsError(f"{index}: {name} mapped to {shard} but absent there")
                self.where[name] = sf
        elif os.path.isfile(single):
            self._add(single)
        else:
            raise SafetensorsError(
                f"{path}: neither model.safetensors nor model.safetensors.index.json found")

    def _add(self, fpath):
        sf = SafetensorsFile(fpath)
        self.files[os.path.basename(fpath)] = sf
        for name in sf.keys():
            if name in self.where:
                raise SafetensorsError(f"tensor {name} appears in more than one shard")
            self.where[name] = sf

    def keys(self):
        return list(self.where)

    def __contains__(self, name):
        return name in self.where

    def _file(self, name):
        try:
            return self.where[name]
        except KeyError:
            raise KeyError(f"tensor not found in checkpoint: {name}") from None

    def dtype(self, name):
        return self._file(name).dtype(name)

    def shape(self, name):
        return self._file(name).shape(name)

    def get_raw(self, name):
        return self._file(name).get_raw(name)

    def get_f64(self, name):
        return self._file(name).get_f64(name)
