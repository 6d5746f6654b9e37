# SPDX-License-Identifier: GPL-2.0
"""Bad input for test_badinput.py: table lines that must be refused, the
stats ioctl request."""
from nxdt import ctl


# ti->error for the removed option (kept verbatim: scripts may match it).
RT_REMOVED = ("read_threshold was removed: small reads are served from the "
              "log only when logged")
USAGE = r"(Usage: nxd <hdd_dev> <ssd_dev>|Not enough arguments)"


def bad_lines(hdd, ssd, L):
    base = f"0 {L} nxd {hdd} {ssd}"
    return [
        (f"0 {L} nxd", USAGE),
        (f"0 {L} nxd {hdd}", USAGE),
        (f"{base} extra", "Invalid number of optional arguments"),
        (f"{base} 2 write_threshold 4096 junk", "Too many arguments"),
        (f"{base} 0 junk", "Too many arguments"),
        (f"0 {L} nxd /dev/nxd-no-such-hdd {ssd}", "Cannot open HDD device"),
        (f"0 {L} nxd {hdd} /dev/nxd-no-such-ssd", "Cannot open SSD device"),
        (f"{base} 3 write_threshold 4096", "Invalid number of optional arguments"),
        (f"{base} 33 " + " ".join(["mode auto"] * 16) + " format",
         "Invalid number of optional arguments"),
        (f"{base} -1 mode auto", "Invalid number of optional arguments"),
        (f"{base} x mode auto", "Invalid number of optional arguments"),
        (f"{base} 1 write_threshold", "Option is missing its value"),
        (f"{base} 3 mode auto low_watermark", "Option is missing its value"),
        (f"{base} 2 frobnicate 1", "Unknown option"),
        (f"{base} 4 mode auto frobnicate 1", "Unknown option"),
        (f"{base} 2 write_threshold -1", "write_threshold must be 0 to 1G"),
        (f"{base} 2 write_threshold 12abc", "write_threshold must be 0 to 1G"),
        (f"{base} 2 write_threshold 64KB", "write_threshold must be 0 to 1G"),
        (f"{base} 2 write_threshold 0x10", "write_threshold must be 0 to 1G"),
        (f"{base} 2 write_threshold 99999999999999999999", "write_threshold must be 0 to 1G"),
        (f"{base} 2 write_threshold 18446744073709551615", "write_threshold must be 0 to 1G"),
        (f"{base} 2 write_threshold 17179869184G", "write_threshold must be 0 to 1G"),
        (f"{base} 2 write_threshold 1073741825", "write_threshold must be 0 to 1G"),
        (f"{base} 2 write_threshold 2G", "write_threshold must be 0 to 1G"),
        (f"{base} 2 read_threshold 0", RT_REMOVED),
        (f"{base} 2 READ_THRESHOLD 4096", RT_REMOVED),
        (f"{base} 4 write_threshold 4096 read_threshold 1M", RT_REMOVED),
        (f"{base} 3 format read_threshold 0", RT_REMOVED),
        (f"{base} 1 read_threshold", RT_REMOVED),
        (f"{base} 2 mode bogus", "mode must be auto, passthrough, log_all or adaptive"),
        (f"{base} 2 low_watermark 101", "low_watermark must be 0 to 100"),
        (f"{base} 2 high_watermark 101", "high_watermark must be 0 to 100"),
        (f"{base} 2 low_watermark -5", "low_watermark must be 0 to 100"),
        (f"{base} 4 low_watermark 80 high_watermark 20",
         "low_watermark must not exceed high_watermark"),
        (f"{base} 2 high_watermark 10",          # default low is 25
         "low_watermark must not exceed high_watermark"),
        (f"{base} 2 destage_rate 1000001", "destage_rate must be 0 to 1000000"),
        (f"{base} 2 ssd_discard 2", "ssd_discard must be 0 to 1"),
        (f"{base} 2 drain_on_suspend 2", "drain_on_suspend must be 0 to 1"),
        (f"{base} 2 drain_on_suspend yes", "drain_on_suspend must be 0 to 1"),
        (f"{base} 2 mode Adaptive", "mode must be auto, passthrough, log_all or adaptive"),
        (f"{base} 2 auto_min_threshold 2048", "auto_min_threshold must be 4K to 1G"),
        (f"{base} 2 auto_max_threshold 0", "auto_max_threshold must be 4K to 1G"),
        (f"{base} 2 auto_max_threshold 2G", "auto_max_threshold must be 4K to 1G"),
        (f"{base} 2 stream_min 0", "stream_min must be 4K to 1G"),
        (f"{base} 4 auto_min_threshold 1M auto_max_threshold 64K",
         "auto_min_threshold must not exceed auto_max_threshold"),
        (f"{base} 2 auto_min_threshold 2M",      # default max is 1M
         "auto_min_threshold must not exceed auto_max_threshold"),
        (f"{base} 2 stripe_size 6000", "stripe_size must be a multiple of 4096"),
        (f"{base} 2 stream_share 91", "stream_share must be 0 to 90"),
    ]


def stats_req(size, bufsize=None, **kw):
    b = ctl.RawBuf(bufsize or max(size, ctl.HDR_SIZE))
    b.put(b"\xa5" * b.n)
    b.put(ctl.hdr(size, **kw))
    return b
