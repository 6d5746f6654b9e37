# SPDX-License-Identifier: GPL-2.0
"""Host ownership of volumes on the real module (docs/admin-guide.md, host
ownership and failover pairs): the owner in the HDD label, nxdctl's
refusal of another host's volume, takeover, and the OCF resource agent.

"This host" is node-a (a system id file named by NXD_SYSTEM_ID_FILE);
another host is simulated by writing another owner into the label.  The
owner is read from the label's bytes (byte 96 of the label block,
docs/on-disk-format.md), never through nxdctl.

  - test_owner_assemble_takeover_grow: create records node-a; a volume
    given to node-b is refused by assemble (exit 6, the owner and the way
    out named) and nothing on either device changes; takeover makes it
    node-a's and it assembles; status --json and list show the owner; the
    owner survives the kernel's label rewrite at grow, and the kernel
    takes the owner on disk, not its copy from activation (cleared while
    active, then grown again: none); takeover of an active volume is
    refused.
  - test_owner_ocf_agent: (make test-full only: 100 to 235 s under TCG)
    ocf-tester passes tools/ocf/nxd (meta-data against ra-api-1.dtd,
    validate-all, probes, start, stop and monitor, each twice); with
    take_over=false the agent fails to start node-b's volume
    (OCF_ERR_GENERIC) and leaves it inactive and node-b's; with the
    default it takes the volume over and starts it; monitor follows; stop
    leaves the owner.
"""
import hashlib
import json
import os
import shutil
import subprocess

import pytest

from nxdt import blkdev, facts, host, nxdvol
from nxdt.blkdev import grow_loop
from nxdt.ctl import nxdctl, NXDCTL
from nxdt.host import REPO, run
from nxdt.rawio import pread_dev

AGENT = os.path.join(REPO, "tools", "ocf", "nxd")
OWNER_OFF = 96


def label_owner(hdd, sector):
    """The owner field of the label at @sector of @hdd, from its bytes."""
    blk = pread_dev(hdd, sector * 512, 4096)
    assert blk[:8] == b"NX_DHDL1", f"no nxd label at sector {sector} of {hdd}"
    return blk[OWNER_OFF:OWNER_OFF + 64].rstrip(b"\0").decode()


def end_label(hdd):
    """Sector of the volume's label: block 0 (format 2), or the end."""
    return nxdvol.hdd_label_offset(hdd) // 512


def metadata_digest(hdd, ssd):
    """What assemble must not change: both superblock blocks, the label."""
    h = hashlib.sha256(pread_dev(ssd, 0, 8 * 4096))
    h.update(pread_dev(hdd, end_label(hdd) * 512, 4096))
    return h.hexdigest()


@pytest.fixture
def node_a(tmp_path, monkeypatch):
    """This host is node-a; no config file."""
    sid = tmp_path / "system_id"
    sid.write_text("node-a\n")
    monkeypatch.setenv("NXD_SYSTEM_ID_FILE", str(sid))
    monkeypatch.setenv("NXD_CONFIG", str(tmp_path / "nxdtab"))
    monkeypatch.setenv("NXD_REMOVED_DIR", str(tmp_path / "removed"))
    return "node-a"


@pytest.mark.guarantee("G10", "G15")
def test_owner_assemble_takeover_grow(dm, loopdev, nullb, node_a):
    hdd, ssd = loopdev(300), nullb(64)
    p = nxdctl("create", "ow0", hdd, ssd)
    dm.created.append("ow0")
    assert "owner of ow0: node-a" in p.stdout, p.stdout
    assert label_owner(hdd, end_label(hdd)) == "node-a"

    # Another host's volume: refused, nothing written.  (Removed without
    # nxdctl's removal mark, which automatic assembly would honour first.)
    dm.remove("ow0")
    nxdctl("set-owner", ssd, "node-b")
    assert label_owner(hdd, end_label(hdd)) == "node-b"
    before = metadata_digest(hdd, ssd)
    for args in ((ssd,), (hdd,), ("--auto", hdd)):
        p = nxdctl("assemble", *args, check=False)
        assert p.returncode == 6, (args, p.returncode, p.stdout, p.stderr)
        assert "belongs to host 'node-b', this host is 'node-a'" in p.stderr, p.stderr
        assert "nxdctl takeover" in p.stderr, p.stderr
        assert not dm.exists("ow0")
    assert metadata_digest(hdd, ssd) == before

    # Takeover: the owner and nothing else; then it assembles.
    p = nxdctl("takeover", hdd)
    assert "owner 'node-b' -> 'node-a'" in p.stdout, p.stdout
    assert label_owner(hdd, end_label(hdd)) == "node-a"
    assert not dm.exists("ow0")
    nxdctl("assemble", ssd, "--name", "ow0")
    dm.created.append("ow0")
    assert dm.exists("ow0")
    s = json.loads(nxdctl("status", "ow0", "--json").stdout)
    assert s["volumes"][0]["owner"] == "node-a", s
    lst = nxdctl("list").stdout
    assert "OWNER" in lst and "node-a" in lst, lst

    # Grow: the kernel rewrites the label (in block 0); the owner stays.
    grow_loop(hdd, 400)
    nxdctl("grow", "ow0")
    assert end_label(hdd) == 0
    assert label_owner(hdd, end_label(hdd)) == "node-a"
    # Cleared on disk while active: the next rewrite keeps the disk's.
    nxdctl("set-owner", "ow0", "--clear")
    assert label_owner(hdd, end_label(hdd)) == ""
    p = nxdctl("takeover", "ow0", check=False)
    assert p.returncode == 1 and "is active on this host" in p.stderr, p.stderr
    grow_loop(hdd, 480)
    nxdctl("grow", "ow0")
    assert label_owner(hdd, end_label(hdd)) == ""
    nxdctl("set-owner", "ow0")
    assert label_owner(hdd, end_label(hdd)) == "node-a"


def agent(action, env):
    return subprocess.run([AGENT, action], env=env, text=True, timeout=300,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE)


@pytest.mark.guarantee("G15")
def test_owner_ocf_agent(dm, loopdev, nullb, node_a):
    tester = shutil.which("ocf-tester")
    assert tester, "ocf-tester missing: make deps (resource-agents)"
    hdd, ssd = loopdev(300), nullb(64)
    nxdctl("create", "ocf0", hdd, ssd)
    dm.created.append("ocf0")
    nxdctl("remove", "ocf0")

    p = run([tester, "-n", "nxdtest", "-o", "name=ocf0", "-o", f"device={ssd}",
             "-o", f"nxdctl={NXDCTL}", AGENT], check=False)
    assert p.returncode == 0 and "passed all tests" in p.stdout, p.stdout + p.stderr
    assert not dm.exists("ocf0")
    assert label_owner(hdd, end_label(hdd)) == "node-a"

    # Another host owns it: take_over=false refuses, changes nothing.
    nxdctl("set-owner", ssd, "node-b")
    env = dict(os.environ, OCF_ROOT="/usr/lib/ocf", OCF_RESOURCE_INSTANCE="nxdtest",
               OCF_RESKEY_name="ocf0", OCF_RESKEY_device=ssd,
               OCF_RESKEY_nxdctl=NXDCTL, OCF_RESKEY_take_over="false")
    p = agent("start", env)
    assert p.returncode == 1, (p.returncode, p.stdout, p.stderr)
    assert "belongs to another host" in p.stderr, p.stderr
    assert agent("monitor", env).returncode == 7
    assert not dm.exists("ocf0")
    assert label_owner(hdd, end_label(hdd)) == "node-b"

    # The default: start takes it over (failover), stop leaves the owner.
    del env["OCF_RESKEY_take_over"]
    p = agent("start", env)
    assert p.returncode == 0, (p.returncode, p.stdout, p.stderr)
    assert agent("monitor", env).returncode == 0
    assert label_owner(hdd, end_label(hdd)) == "node-a"
    host.wait_for(lambda: os.path.exists(dm.path("ocf0")), what=dm.path("ocf0"))
    assert agent("stop", env).returncode == 0
    assert agent("monitor", env).returncode == 7
    assert not dm.exists("ocf0")
    assert label_owner(hdd, end_label(hdd)) == "node-a"
