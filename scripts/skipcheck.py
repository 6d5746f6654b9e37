#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Fail a `make test` whose skips left a test unrun on every kernel.

    scripts/skipcheck.py [--allow REGEX]... KVER-junit.xml...
    scripts/skipcheck.py --self-test

Reads the guests' junit files (scripts/test.sh: build/logs/<kver>-junit.xml)
and exits 1, naming the tests, when a test was skipped in every file that
has it and ran (passed, failed, xfailed) in none: test.sh allows some skips
on some kernels (SKIP_ALLOW), which is right only if another kernel runs
the test.  Skips whose reason matches ALLOW (below, or --allow) are tests
that run from another make target and are not counted.  Exit 2 when a file
is missing or not junit: then nothing can be said.

--self-test checks this script on tests/fixtures/skipcheck/ and the
sharding of tests/vm/nxdt/shard.py on the host's collection of tests/vm: a
test added or renamed moves no other test, a needs_kernel test lands on a
kernel new enough; it prints each shard's estimated seconds.  It also
checks that every reason of ALLOW is in test.sh's SKIP_ALLOW, which
decides whether a guest's skip fails make test.
"""

import argparse
import contextlib
import io
import os
import re
import sys
import xml.etree.ElementTree as ET

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Skips of tests that run from another make target, never in make test.
ALLOW = (
    r"the campaign runs from make crash-campaign",
    r"the soak runs from make crash-soak",
    r"the DKMS package test runs from make test-packages",
    r"the util-linux prober test runs from make test-prober",
)


def test_path(classname, name):
    """tests/vm/test_x.py::name (or ::Class::name) of a junit testcase."""
    parts = classname.split(".")
    for k, p in enumerate(parts):
        if p.startswith("test_"):
            mod = "/".join(parts[:k + 1]) + ".py"
            return "::".join([mod] + parts[k + 1:] + [name])
    return f"{classname}::{name}"


def kernel_of(path):
    base = os.path.basename(path)
    return base[:-len("-junit.xml")] if base.endswith("-junit.xml") else base


def read_junit(path):
    """[(test, ran, skip reason)] of a junit file; raises on a bad file."""
    root = ET.parse(path).getroot()
    if root.tag not in ("testsuites", "testsuite"):
        raise ValueError(f"{path}: <{root.tag}> is not junit")
    out = []
    for tc in root.iter("testcase"):
        tid = test_path(tc.get("classname", ""), tc.get("name", ""))
        sk = [e for e in tc.findall("skipped") if e.get("type") != "pytest.xfail"]
        ran = not sk or tc.find("failure") is not None or tc.find("error") is not None
        out.append((tid, ran, "" if ran else (sk[0].get("message") or sk[0].text or "")))
    return out


def unrun(files, allow):
    """{test: [(kernel, reason)]} of the tests skipped wherever they appear."""
    seen = {}
    for path in files:
        for tid, ran, reason in read_junit(path):
            seen.setdefault(tid, []).append((kernel_of(path), ran, reason))
    res = {}
    for tid, rows in seen.items():
        if any(ran for _, ran, _ in rows):
            continue
        if all(any(re.search(a, reason) for a in allow) for _, _, reason in rows):
            continue
        res[tid] = [(kv, reason) for kv, _, reason in rows]
    return res


def check(files, allow, out=sys.stdout):
    """Print the verdict; 0 (every test ran somewhere), 1 or 2."""
    for path in files:
        if not os.path.isfile(path):
            print(f"skipcheck: FAIL: {path} missing: cannot tell which tests ran", file=out)
            return 2
    try:
        bad = unrun(files, allow)
    except (ET.ParseError, ValueError) as e:
        print(f"skipcheck: FAIL: {e}", file=out)
        return 2
    kernels = ", ".join(kernel_of(p) for p in files)
    if not bad:
        print(f"skipcheck: every test skipped somewhere ran on another kernel ({kernels})"
              " or runs from another make target", file=out)
        return 0
    print(f"skipcheck: FAIL: {len(bad)} test(s) skipped on every kernel that has them"
          f" ({kernels}), run on none:", file=out)
    for tid in sorted(bad):
        why = "; ".join(f"{kv}: {r}" for kv, r in bad[tid])
        print(f"  {tid}  [{why}]", file=out)
    return 1


# ------------------------------------------------------------- self-test ---

FIXTURES = os.path.join(HERE, "tests", "fixtures", "skipcheck")


def _fixture_cases(fail):
    """Each tests/fixtures/skipcheck/<case>/: its *-junit.xml files and
    'expect' (first line the exit code, then the tests it names)."""
    for case in sorted(os.listdir(FIXTURES)):
        d = os.path.join(FIXTURES, case)
        if not os.path.isdir(d):
            continue
        with open(os.path.join(d, "expect")) as f:
            lines = [ln.strip() for ln in f if ln.strip() and not ln.startswith("#")]
        want_rc, want = int(lines[0]), sorted(lines[1:])
        files = sorted(os.path.join(d, x) for x in os.listdir(d) if x.endswith("-junit.xml"))
        buf = io.StringIO()
        rc = check(files + (["/nonexistent/6.6.0-junit.xml"] if case == "missing" else []),
                   ALLOW, buf)
        got = sorted(ln.split()[0] for ln in buf.getvalue().splitlines()
                     if ln.startswith("  "))
        ok = rc == want_rc and got == want
        print(f"  fixture {case}: exit {rc}, {len(got)} named: {'ok' if ok else 'WRONG'}")
        if not ok:
            fail(f"fixture {case}: exit {rc} (want {want_rc}), named {got} (want {want})\n"
                 + buf.getvalue())


def _collect():
    """[(test id, needs_kernel version or None)] of the host's collection
    of tests/vm as make test runs it (NXD_FULL=0; test_pfs.py is in
    test.sh's NXD_TESTS_EXCLUDE)."""
    import pytest

    got = []

    class Grab:
        @pytest.hookimpl(trylast=True)
        def pytest_collection_finish(self, session):
            for it in session.items:
                m = it.get_closest_marker("needs_kernel")
                got.append((it.nodeid.rsplit("/", 1)[-1], m.args[0] if m else None))

    env = {k: os.environ.pop(k) for k in list(os.environ) if k.startswith("NXD_SHARD")}
    os.environ["NXD_FULL"] = "0"
    cwd = os.getcwd()
    os.chdir(HERE)
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            rc = pytest.main(["--collect-only", "-q", "-p", "no:cacheprovider", "tests/vm",
                              "--ignore=tests/vm/test_pfs.py"], plugins=[Grab()])
    finally:
        os.chdir(cwd)
        os.environ.update(env)
    if rc != 0 or not got:
        raise RuntimeError(f"host collection of tests/vm failed (pytest exit {rc})")
    return got


def _shard_checks(fail):
    sys.path.insert(0, os.path.join(HERE, "tests", "vm"))
    from nxdt import shard

    kvers = ["6.1.0-57-amd64", "6.12.95+deb12-amd64"]
    tests = _collect()
    names = [t for t, _ in tests]
    needs = {t: v for t, v in tests if v}
    n = 2
    base = shard.plan(names, n, kvers, needs)
    loads = shard.shard_loads(base, n)
    spread = (max(loads) - min(loads)) / max(loads)
    print(f"  host collection: {len(names)} tests, {sum(1 for s in base.values() if len(s) == n)}"
          f" on every kernel, {len(needs)} needing a kernel")
    for i, kv in enumerate(kvers):
        k = sum(1 for s in base.values() if s == (i,))
        print(f"  shard {i} ({kv}): {k} tests of its own, estimated {loads[i]} s")
    print(f"  spread {spread:.1%}" + ("" if spread <= 0.10 else
                                     "  (over 10 %: move tests between shards in HEAVY)"))
    for t, v in needs.items():
        for i in base[t]:
            if not shard.kernel_ok(kvers[i], v):
                fail(f"{t} needs {v} but goes to shard {i} ({kvers[i]})")
        if shard.plan([t], n, None, needs)[t] != (n - 1,):
            fail(f"{t}: without NXD_SHARD_KVERS not on the last (newest) shard")
    for t in names:
        if t in shard.HEAVY and t not in needs and base[t] != (shard.HEAVY[t][1],):
            fail(f"{t}: shard {base[t]}, HEAVY says {shard.HEAVY[t][1]}")
        if shard.on_every_kernel(t) and base[t] != tuple(range(n)):
            fail(f"{t}: in EVERY_KERNEL but on {base[t]}")
    # Stability: added tests, a renamed one and a subset (-k, NXD_TESTS)
    # move no other test.
    extra = [f"test_{f}.py::test_fake_{k}" for f in ("aa_new", "zz_new") for k in range(25)]
    variants = {
        "one test added": (names + extra[:1], needs),
        "50 tests added": (names + extra, needs),
        "one test renamed": ([t + "_renamed" if t == names[0] else t for t in names], needs),
        "every other test left out": (names[::2], needs),
        "a needs_kernel test added": (names + ["test_zz_new.py::test_needs"],
                                      dict(needs, **{"test_zz_new.py::test_needs": "6.6"})),
    }
    for what, (nm, nd) in variants.items():
        p = shard.plan(nm, n, kvers, nd)
        moved = [t for t in nm if t in base and p[t] != base[t]]
        print(f"  {what}: {len(moved)} other tests moved")
        if moved:
            fail(f"{what}: moved {moved[:10]}")
    # Another number of kernels: deterministic, every test on one shard.
    p3 = shard.plan(names, 3, ["5.10.0-1-amd64", "6.1.0-57-amd64", "6.12.95+deb12-amd64"], needs)
    if p3 != shard.plan(list(reversed(names)), 3,
                        ["5.10.0-1-amd64", "6.1.0-57-amd64", "6.12.95+deb12-amd64"], needs):
        fail("3 shards: the plan depends on the order of the tests")
    print(f"  3 kernels: estimated {shard.shard_loads(p3, 3)} s")
    for args in (("1/2", "6.1.0-57-amd64"), ("2/2", ""), ("0/2", "a,b,c")):
        try:
            shard.parse_env(*args)
            fail(f"parse_env{args} accepted")
        except ValueError:
            pass
    if shard.parse_env("1/2", "6.1.0-57-amd64, 6.12.95+deb12-amd64") != (1, 2, kvers):
        fail("parse_env of a comma-separated kernel list")


def _allow_in_test_sh(fail):
    """Every ALLOW reason is also in scripts/test.sh's SKIP_ALLOW: a skip
    this script counts as run elsewhere must not fail test.sh's accounting
    (a test that skips unless its make target built something skipped
    in a clean clone's make test, and test.sh failed the run)."""
    text = open(os.path.join(HERE, "scripts", "test.sh")).read()
    m = re.search(r"^SKIP_ALLOW=\((.*?)^\)", text, re.S | re.M)
    if not m:
        fail("scripts/test.sh: no SKIP_ALLOW=( ... ) list")
        return
    for reason in ALLOW:
        if reason not in m.group(1):
            fail(f"ALLOW reason {reason!r} is not in scripts/test.sh's SKIP_ALLOW")
    print(f"  {len(ALLOW)} ALLOW reasons, each in test.sh's SKIP_ALLOW: "
          f"{'ok' if all(r in m.group(1) for r in ALLOW) else 'no'}")


def self_test():
    errors = []
    print("skipcheck self-test: ALLOW against scripts/test.sh")
    _allow_in_test_sh(errors.append)
    print("skipcheck self-test: junit fixtures")
    _fixture_cases(errors.append)
    print("skipcheck self-test: sharding (tests/vm/nxdt/shard.py)")
    try:
        _shard_checks(errors.append)
    except RuntimeError as e:
        errors.append(str(e))
    for e in errors:
        print(f"  FAIL: {e}")
    print("skipcheck self-test: " + ("FAILED" if errors else "passed"))
    return 1 if errors else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--allow", action="append", default=[], metavar="REGEX",
                    help="a skip reason of a test run from another make target (more than ALLOW)")
    ap.add_argument("--self-test", action="store_true")
    ap.add_argument("junit", nargs="*")
    a = ap.parse_args()
    if a.self_test:
        return self_test()
    if not a.junit:
        ap.error("no junit files")
    return check(a.junit, ALLOW + tuple(a.allow))


if __name__ == "__main__":
    sys.exit(main())
