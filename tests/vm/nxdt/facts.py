# SPDX-License-Identifier: GPL-2.0
"""What the tests know of dm-nxd's interfaces, in one place.

The status line's counters in order (docs/status.md), the tunables, the
longest volume over an HDD (docs/on-disk-format.md section 5), the
parsing of a status line, the boot unit's command lines and the units
(SECTOR, BLOCK, KiB, MiB).  Standard library only: imported by the guest
tests, the crash harness and the benchmark.
"""

import os
import shlex

SECTOR = 512
BLOCK = 4096
KiB = 1 << 10
MiB = 1 << 20
# Sectors at the end of the HDD's last whole MiB kept for the HDD label.
LABEL_SECTORS = 2048

TUNABLES = ["write_threshold", "mode", "low_watermark", "high_watermark",
            "destage_rate", "ssd_discard", "drain_on_suspend",
            # mode adaptive's (target 2.4.0)
            "auto_min_threshold", "auto_max_threshold", "stream_min",
            "stripe_size",
            # who pays when the log fills
            "stream_share"]
# Their defaults, as sysfs prints them.
TUNABLE_DEFAULTS = {"write_threshold": "65536", "mode": "auto",
                    "low_watermark": "25", "high_watermark": "75",
                    "destage_rate": "0", "ssd_discard": "1",
                    "drain_on_suspend": "0", "auto_min_threshold": "4096",
                    "auto_max_threshold": "1048576", "stream_min": "4194304",
                    "stripe_size": "0", "stream_share": "0"}

STATUS_FIELDS = [
    "log_blocks", "log_used_blocks", "index_entries", "index_bytes",
    "writes_logged", "writes_direct", "writes_around_full", "reads_hdd",
    "reads_ssd", "segments_written", "log_blocks_written", "invalidations",
    "rmw_reads", "destaged_blocks", "destaged_bytes", "destage_bios",
    "destage_throttled_ms", "segments_reclaimed", "ssd_errors", "hdd_errors",
    "flushes", "discards", "recovered_segments", "recovered_blocks",
    "recovery_us", "degraded",
    # appended in target 2.1.0: events (never reset) and the log-full flag
    "events", "last_event", "events_degraded", "events_log_full",
    "events_drain_done", "log_full",
    # appended in target 2.2.0: whole-stripe destage bios, time in rounds
    "destage_stripe_bios", "destage_busy_us",
    # appended in target 2.3.0: destage bios' bytes (fill gaps too), the
    # acknowledged-loss flag and its event
    "destage_hdd_bytes", "acked_lost", "events_acked_lost",
]


def data_sectors(hdd_sectors):
    """Longest nxd volume over an HDD of @hdd_sectors: its whole MiBs less
    the label's MiB (0 when the HDD is too small for any)."""
    r = (hdd_sectors // 2048) * 2048
    return r - LABEL_SECTORS if r > LABEL_SECTORS else 0


def parse_params(params):
    """The status parameters of nxd (after the target name) as a dict: the
    state, then every counter of STATUS_FIELDS, all of them present."""
    f = params.split()
    assert len(f) == 1 + len(STATUS_FIELDS), f"nxd status has {len(f)} words: {params}"
    d = {"state": f[0]}
    d.update(zip(STATUS_FIELDS, map(int, f[1:])))
    return d


def parse_status(line):
    """A whole `dmsetup status` line of an nxd volume as a dict."""
    f = line.split(None, 3)
    assert len(f) == 4 and f[2] == "nxd", line
    return parse_params(f[3])


UNITS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..",
                     "systemd")


def unit_cmd(unit, key, instance=None):
    """The @key= command line (ExecStart, ExecStop) of systemd/@unit as
    argv, %i replaced by @instance: the tests run it where systemd would."""
    with open(os.path.join(UNITS, unit)) as f:
        lines = [ln.split("=", 1)[1].strip() for ln in f.read().splitlines()
                 if ln.startswith(key + "=")]
    assert len(lines) == 1, (unit, key, lines)
    argv = shlex.split(lines[0])
    assert argv[0] == "/usr/sbin/nxdctl", argv
    if instance is not None:
        argv = [a.replace("%i", instance) for a in argv]
    assert not any("%" in a for a in argv), argv
    return argv
