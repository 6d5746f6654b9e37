# SPDX-License-Identifier: GPL-2.0
"""An independent reader of nxd's on-disk format (docs/on-disk-format.md):
superblocks, segment headers, the log walk, and the kernel's crc32c.
"""
import struct
from nxdt.facts import BLOCK
from nxdt.rawio import pread_dev, pwrite_dev


SB_MAGIC = 0x3142535F44584E00


SEG_MAGIC = 0x3147455344584E00


LABEL_MAGIC = 0x314C4448445F584E


RING_START = 8


SEG_MAX_BLOCKS = 128


def parse_sb(blk):
    magic, crc, ver, sb_seq = struct.unpack_from("<QIIQ", blk, 0)
    if magic != SB_MAGIC:
        return None
    vol_uuid, hdd_uuid = blk[24:40], blk[40:56]
    (hdd_sectors, label_sector, data_sec, bsize, segmax, ring_start, ring_blocks,
     tail_pos, tail_seq, gen, gen_start, head_pos, head_seq, flags) = \
        struct.unpack_from("<QQQIIQQQQQQQQI", blk, 56)
    # The stored name and tunables (docs/on-disk-format.md, bytes 160-327).
    (tun_flags, mode, wthr, rate, low, high, discard, drain, amin, amax,
     smin, stripe) = struct.unpack_from("<IIQIBBBBIIII", blk, 288)
    share = blk[336] if tun_flags & 4 else 0    # NXD_SB_TUN_SHARE
    # Format 2 keeps the data area's start at byte 328 (format 1: zero).
    data_off = struct.unpack_from("<Q", blk, 328)[0] if ver == 2 else 0
    return dict(sb_seq=sb_seq, version=ver, data_offset=data_off,
                vol_uuid=vol_uuid, hdd_uuid=hdd_uuid,
                hdd_sectors=hdd_sectors, label_sector=label_sector,
                data_sectors=data_sec, ring_start=ring_start,
                ring_blocks=ring_blocks, tail_pos=tail_pos, tail_seq=tail_seq,
                gen=gen, gen_start_seq=gen_start, head_pos=head_pos,
                head_seq=head_seq, flags=flags,
                name=blk[160:288].split(b"\0", 1)[0].decode(),
                tun_flags=tun_flags, mode=mode, write_threshold=wthr,
                destage_rate=rate, low_watermark=low, high_watermark=high,
                ssd_discard=discard, drain_on_suspend=drain,
                auto_min_threshold=amin, auto_max_threshold=amax,
                stream_min=smin, stripe_size=stripe, stream_share=share)


_CRC32C_TAB = []


def crc32c_raw(data, crc=0xFFFFFFFF):
    """The kernel's crc32c(seed, p, len): reflected Castagnoli, no
    inversion before or after (kernel/nxd_codec.c seeds it with ~0)."""
    if not _CRC32C_TAB:
        for i in range(256):
            c = i
            for _ in range(8):
                c = (c >> 1) ^ (0x82F63B78 if c & 1 else 0)
            _CRC32C_TAB.append(c)
    for b in data:
        crc = (crc >> 8) ^ _CRC32C_TAB[(crc ^ b) & 0xFF]
    return crc


def clear_sb_clean(ssd):
    """Clear CLEAN (flags bit 0, offset 152) in both superblock copies and
    reseal them: the next activation replays the log as after a crash."""
    for i in range(2):
        blk = bytearray(pread_dev(ssd, i * BLOCK, BLOCK))
        if parse_sb(bytes(blk)) is None:
            continue
        flags, = struct.unpack_from("<I", blk, 152)
        struct.pack_into("<I", blk, 152, flags & ~1)
        struct.pack_into("<I", blk, 8, 0)
        struct.pack_into("<I", blk, 8, crc32c_raw(blk))
        pwrite_dev(ssd, i * BLOCK, bytes(blk))


def set_version(dev, off, version):
    """Write VERSION (byte 12) into the superblock or HDD label block at
    byte OFF of DEV and reseal its checksum: a valid block of a format
    this module does not know."""
    blk = bytearray(pread_dev(dev, off, BLOCK))
    struct.pack_into("<I", blk, 12, version)
    struct.pack_into("<I", blk, 8, 0)
    struct.pack_into("<I", blk, 8, crc32c_raw(blk))
    pwrite_dev(dev, off, bytes(blk))


def read_sbs(ssd):
    """Both superblock copies as parsed dicts (None: no magic)."""
    raw = pread_dev(ssd, 0, 2 * BLOCK)
    return [parse_sb(raw[:BLOCK]), parse_sb(raw[BLOCK:])]


def newest_sb(ssd):
    """(index, sb) of the copy with the highest sb_seq (both assumed valid)."""
    sbs = read_sbs(ssd)
    assert sbs[0] and sbs[1], sbs
    i = 1 if sbs[1]["sb_seq"] > sbs[0]["sb_seq"] else 0
    return i, sbs[i]


def uuid_str(b):
    h = b.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def parse_seg(blk):
    magic, crc, flags, seq, gen, pos, nr_data, nr_recs = struct.unpack_from("<QIIQQQII", blk, 0)
    if magic != SEG_MAGIC:
        return None
    recs = []
    for i in range(nr_recs):
        block, val, typ, mask, _ = struct.unpack_from("<QIBBH", blk, 64 + 16 * i)
        recs.append((typ, block, val, mask))
    return dict(seq=seq, gen=gen, pos=pos, nr_data=nr_data, nr_recs=nr_recs,
                flags=flags, vol_uuid=blk[48:64], recs=recs)


def next_seg_pos(ring_blocks, end):
    return 0 if end > ring_blocks or ring_blocks - end < SEG_MAX_BLOCKS else end


def walk_log(ssd, sb, max_segs=100000):
    """Segments from the superblock's tail while magic, volume, seq and pos
    chain (header checksums are not verified: the tests corrupt on purpose
    only where they know).  Each: dict + 'ssd_off' of its header."""
    segs = []
    pos, seq = sb["tail_pos"], sb["tail_seq"]
    rb = sb["ring_blocks"]
    while len(segs) < max_segs:
        if sb["flags"] & 1 and seq == sb["head_seq"]:
            break
        off = (sb["ring_start"] + pos) * BLOCK
        s = parse_seg(pread_dev(ssd, off, BLOCK))
        if not s or s["seq"] != seq or s["pos"] != pos or s["vol_uuid"] != sb["vol_uuid"]:
            break
        s["ssd_off"] = off
        segs.append(s)
        pos = next_seg_pos(rb, pos + 1 + s["nr_data"])
        seq += 1
    return segs


def data_recs(seg):
    return [(b, m) for t, b, v, m in seg["recs"] if t == 1]


def check_log_matches_writes(ssd, sb, writes):
    """The on-disk log as the format says it is: one segment per write,
    a full and a 7-sector DATA record each, data equal to what was
    written."""
    segs = walk_log(ssd, sb)
    assert len(segs) == len(writes), [data_recs(s) for s in segs]
    for s, (off, d) in zip(segs, writes):
        b = off // BLOCK
        assert data_recs(s) == [(b, 0xFF), (b + 1, 0x7F)], (s["seq"], data_recs(s))
        assert pread_dev(ssd, s["ssd_off"] + BLOCK, len(d)) == d
    return segs
