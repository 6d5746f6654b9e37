# SPDX-License-Identifier: GPL-2.0
"""A power cut across two boots (scripts/powercut_guest.py,
scripts/pfs_guest.py): what boot 1 leaves on the shared directory for
boot 2 (its parameters, durable before the cut; a failure of its own
checks; that the cut never came) and boot 2 reading them back."""
import json

from nxdt.fstack import write_fsynced


def save_params(d, params):
    write_fsynced(f"{d}/params.json", json.dumps(params), mode="w")
    write_fsynced(f"{d}/durable.log", "", mode="w")


def load_params(d, seed):
    with open(f"{d}/params.json") as f:
        p = json.load(f)
    assert p["seed"] == seed, (p, seed)
    return p


def boot1_failed(d, tag, msg):
    write_fsynced(f"{d}/boot1-failed", msg + "\n", mode="w")
    print(f"{tag}: FAIL: {msg}", flush=True)
    return 1


def no_crash(d):
    """Boot 1 outlived its cut: say so for boot 2; boot 1 then fails."""
    write_fsynced(f"{d}/no-crash", "the guest did not crash\n", mode="w")
    return 1
