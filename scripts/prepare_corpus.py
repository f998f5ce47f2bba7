#!/usr/bin/python3
"""Build the deterministic tokenizer / model training corpus from Debian's Python 3.11 sources.

    /usr/bin/python3 scripts/prepare_corpus.py OUT_DIR [--max-mb 16] [--val-percent 5]

Writes OUT_DIR/train.txt, OUT_DIR/val.txt and OUT_DIR/manifest.json, and prints the file counts,
byte sizes and sha256 of both texts (docs/data.md). Standard library only.

Which files: the *.py files under /usr/lib/python3.11 that the dpkg packages libpython3.11-minimal
and libpython3.11-stdlib install (every Debian 12 machine with python3.11 has exactly these; files
of optional packages such as python3-distutils, python3-lib2to3, python3-tk or pip are left out, so
the corpus does not depend on what else is installed), minus test code (any test/ or tests/
directory, idlelib/), site-packages/ and dist-packages/, symbolic links, and the architecture-
specific _sysconfigdata*.py. Every file's MD5 is checked against dpkg's record, so a locally
edited file is refused instead of silently changing the corpus.

Split: a file goes to val when a stable hash of its relative path (sha256 of "mmx-corpus-v1:" +
path) falls in the first --val-percent of the hash range — the split never depends on the other
files, and no file is in both. --max-mb caps train.txt: train files are taken in hash order (a fixed
pseudo-random order, so a small cap still samples every package) as long as they fit. Each text
holds its files in sorted path order, each preceded by the separator line "# ==== <path> ====".

Bit-for-bit reproducible for a given libpython3.11-stdlib / -minimal version (manifest.json
records both); Debian 12 point releases that patch the standard library change the hashes.
"""

import argparse
import glob
import hashlib
import json
import os
import sys

ROOT = "/usr/lib/python3.11"
PACKAGES = ("libpython3.11-minimal", "libpython3.11-stdlib")
# encodings/: 120 machine-generated codec tables (gencodec.py: hex maps and Unicode names), a
# quarter of the files; a small model trained with them spends its capacity on hex tables.
EXCLUDED_DIRS = {"test", "tests", "idlelib", "site-packages", "dist-packages", "encodings"}
SALT = b"mmx-corpus-v1:"
FORMAT_VERSION = 2


def fail(msg):
    print(f"prepare_corpus: error: {msg}", file=sys.stderr)
    sys.exit(1)


def dpkg_info_file(pkg, ext):
    """/var/lib/dpkg/info/PKG:ARCH.EXT (Multi-Arch: same) or PKG.EXT."""
    found = sorted(glob.glob(f"/var/lib/dpkg/info/{pkg}:*.{ext}")) + sorted(glob.glob(f"/var/lib/dpkg/info/{pkg}.{ext}"))
    if not found:
        fail(f"no dpkg record of {pkg} (/var/lib/dpkg/info/{pkg}*.{ext}): is python3.11 installed from Debian?")
    return found[0]


def dpkg_version(pkg):
    with open("/var/lib/dpkg/status", encoding="utf-8") as f:
        for stanza in f.read().split("\n\n"):
            fields = dict(line.split(": ", 1) for line in stanza.splitlines() if ": " in line and not line.startswith(" "))
            if fields.get("Package") == pkg and "installed" in fields.get("Status", "").split():
                return fields.get("Version", "?")
    fail(f"{pkg} is not installed (dpkg status)")


def is_excluded(rel):
    parts = rel.split("/")
    if any(p in EXCLUDED_DIRS for p in parts[:-1]):
        return True
    return parts[-1].startswith("_sysconfigdata")


def collect():
    """Sorted [(relpath, bytes)] of the corpus files, each checked against dpkg's MD5."""
    md5s = {}
    for pkg in PACKAGES:
        with open(dpkg_info_file(pkg, "md5sums"), encoding="utf-8") as f:
            for line in f:
                digest, path = line.rstrip("\n").split(None, 1)
                md5s["/" + path] = digest
    files = []
    for pkg in PACKAGES:
        with open(dpkg_info_file(pkg, "list"), encoding="utf-8") as f:
            for line in f:
                path = line.rstrip("\n")
                if not (path.startswith(ROOT + "/") and path.endswith(".py")):
                    continue
                rel = path[len(ROOT) + 1:]
                if is_excluded(rel) or os.path.islink(path) or not os.path.isfile(path):
                    continue
                with open(path, "rb") as g:
                    data = g.read()
                if path not in md5s:
                    fail(f"{path}: dpkg records no MD5 for it")
                if hashlib.md5(data).hexdigest() != md5s[path]:
                    fail(f"{path} differs from the file its Debian package installed (MD5 mismatch): "
                         "reinstall the package to get the reproducible corpus")
                try:
                    data.decode("utf-8")
                except UnicodeDecodeError as e:
                    fail(f"{path} is not UTF-8 ({e})")
                files.append((rel, data))
    files.sort(key=lambda f: f[0].encode("utf-8"))
    for a, b in zip(files, files[1:]):
        if a[0] == b[0]:
            fail(f"{a[0]} is listed by two packages")
    return files


def path_hash(rel):
    return int.from_bytes(hashlib.sha256(SALT + rel.encode("utf-8")).digest()[:8], "big")


def render(files):
    out = bytearray()
    for rel, data in files:
        out += f"# ==== {rel} ====\n".encode("utf-8")
        out += data
        if data and not data.endswith(b"\n"):
            out += b"\n"
    return bytes(out)


def rendered_size(rel, data):
    return len(f"# ==== {rel} ====\n".encode("utf-8")) + len(data) + (1 if data and not data.endswith(b"\n") else 0)


def write_atomic(path, data):
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out_dir", help="output directory (created); e.g. data/corpus")
    ap.add_argument("--max-mb", type=float, default=16.0, help="cap on train.txt in MB (1e6 bytes); default 16")
    ap.add_argument("--val-percent", type=float, default=5.0, help="share of files held out for val.txt; default 5")
    a = ap.parse_args()
    if a.max_mb <= 0:
        fail("--max-mb must be > 0")
    if not 0 < a.val_percent < 100:
        fail("--val-percent must be in (0, 100)")

    files = collect()
    if not files:
        fail(f"no corpus files found under {ROOT}")
    threshold = int(a.val_percent / 100 * 2**64)
    val = [f for f in files if path_hash(f[0]) < threshold]
    candidates = sorted((f for f in files if path_hash(f[0]) >= threshold), key=lambda f: path_hash(f[0]))
    cap = int(a.max_mb * 1e6)
    train, size = [], 0
    for rel, data in candidates:
        n = rendered_size(rel, data)
        if size + n > cap:
            break
        train.append((rel, data))
        size += n
    if not train:
        fail(f"--max-mb {a.max_mb}: not even the first train file fits")
    train.sort(key=lambda f: f[0].encode("utf-8"))

    os.makedirs(a.out_dir, exist_ok=True)
    manifest = {
        "format_version": FORMAT_VERSION,
        "generator": "scripts/prepare_corpus.py",
        "source": ROOT,
        "packages": {p: dpkg_version(p) for p in PACKAGES},
        "max_mb": a.max_mb,
        "val_percent": a.val_percent,
        "files_considered": len(files),
        "files_left_out_by_cap": len(candidates) - len(train),
    }
    for name, part in (("train", train), ("val", val)):
        text = render(part)
        write_atomic(os.path.join(a.out_dir, f"{name}.txt"), text)
        digest = hashlib.sha256(text).hexdigest()
        manifest[name] = {"files": len(part), "bytes": len(text), "sha256": digest, "paths": [r for r, _ in part]}
        print(f"{name}: {len(part)} files, {len(text)} bytes, sha256 {digest}  ({os.path.join(a.out_dir, name + '.txt')})")
    write_atomic(os.path.join(a.out_dir, "manifest.json"), (json.dumps(manifest, indent=1) + "\n").encode("utf-8"))
    print(f"from {len(files)} files of {', '.join(f'{p} {v}' for p, v in manifest['packages'].items())}; "
          f"{manifest['files_left_out_by_cap']} train files left out by --max-mb {a.max_mb:g}")


if __name__ == "__main__":
    main()
