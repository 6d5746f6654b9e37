# SPDX-License-Identifier: GPL-2.0
"""File-system stack helpers shared by the file-system tests and the
GlusterFS stack: checksums of what was written, fsync, dropping caches.
"""
import hashlib
import os
from nxdt.facts import MiB
from nxdt.host import run


def sha(data):
    return hashlib.sha256(data).hexdigest()


def sha_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while True:
            b = f.read(4 * MiB)
            if not b:
                return h.hexdigest()
            h.update(b)


def fsync_path(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def drop_caches():
    run("sync")
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")
