"""The S3 gateway on a cluster with a secret: S3 keys (``thaw auth s3-key``)
map to Thaw users, and the gateway enforces their owners, groups and modes
as any client's; signatures in headers and in presigned URLs, unsigned and
unknown keys refused, a deleted key refused within seconds, keys kept in the
journal across a restart, a key's default job, and HTTPS with the cluster's
certificates."""

from __future__ import annotations

import json
import os
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import thaw

from .procs import cli_gateway

boto3 = pytest.importorskip("boto3")
from botocore import UNSIGNED  # noqa: E402
from botocore.auth import S3SigV4Auth  # noqa: E402
from botocore.awsrequest import AWSRequest  # noqa: E402
from botocore.config import Config  # noqa: E402
from botocore.credentials import Credentials  # noqa: E402
from botocore.exceptions import ClientError  # noqa: E402

MIB = 1 << 20


def _secret(tmp_path: Path) -> Path:
    path = tmp_path / "secret"
    subprocess.run([thaw.cluster.find_binary(), "auth", "secret", str(path)], check=True, capture_output=True)
    return path


def cli(c: thaw.LocalCluster, *args: str, token: str | None = None) -> subprocess.CompletedProcess[str]:
    """``thaw ARGS`` against the cluster, as its administrator (the secret)
    or as the holder of ``token``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("THAW_")}
    env["THAW_MASTER"] = c.master
    if token is not None:
        env["THAW_TOKEN"] = token
    else:
        env["THAW_SECRET_FILE"] = str(c.secret_file)
    if c.tls_ca is not None:
        env["THAW_TLS_CA"] = c.tls_ca
    return subprocess.run(
        [thaw.cluster.find_binary(), *args], env=env, capture_output=True, text=True, timeout=60
    )


def new_key(c: thaw.LocalCluster, *args: str, token: str | None = None) -> dict[str, Any]:
    r = cli(c, "auth", "s3-key", "create", "--json", *args, token=token)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def s3(c: thaw.LocalCluster, key: dict[str, Any] | None, **kw: Any) -> Any:
    # SigV4 (headers, and presigned URLs: boto3 presigns with SigV2 otherwise).
    cfg = Config(retries={"max_attempts": 1}, signature_version=UNSIGNED if key is None else "s3v4")
    if key is not None:
        kw.setdefault("aws_access_key_id", key["access_key"])
        kw.setdefault("aws_secret_access_key", key["secret_key"])
    if c.tls_ca is not None:
        kw.setdefault("verify", c.tls_ca)
    kw.setdefault("endpoint_url", c.s3)
    return boto3.client("s3", region_name="us-east-1", config=cfg, **kw)


def code(e: pytest.ExceptionInfo[ClientError]) -> tuple[str, int]:
    r = e.value.response
    return r["Error"]["Code"], r["ResponseMetadata"]["HTTPStatusCode"]


def fails(expected: tuple[str, int], call: Callable[[], Any]) -> None:
    """`call` fails with S3's `expected` (code, HTTP status)."""
    with pytest.raises(ClientError) as e:
        call()
    assert code(e) == expected


def signed_api(
    c: thaw.LocalCluster, key: dict[str, Any], method: str, query: str
) -> tuple[int, dict[str, Any]]:
    """A call of the gateway's ``/?thaw=...`` API, signed (SigV4) with ``key``
    (``query``'s values encoded as SigV4 canonicalizes them)."""
    pairs = urllib.parse.parse_qsl(f"thaw={query}", keep_blank_values=True)
    url = f"{c.s3}/?{urllib.parse.urlencode(pairs, quote_via=urllib.parse.quote, safe='-_.~')}"
    req = AWSRequest(method=method, url=url, data=b"")
    S3SigV4Auth(Credentials(key["access_key"], key["secret_key"]), "s3", "us-east-1").add_auth(req)
    r = urllib.request.Request(req.url, method=method, headers=dict(req.headers.items()), data=b"")
    try:
        with urllib.request.urlopen(r, timeout=30) as resp:
            return resp.status, json.load(resp)
    except urllib.error.HTTPError as e:
        return e.code, {"error": e.read().decode()}


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[thaw.LocalCluster]:
    secret = _secret(tmp_path_factory.mktemp("s3keys"))
    with thaw.LocalCluster(
        workers=1, mem_capacity="128MiB", block_size="1MiB", secret_file=secret, s3_port=0
    ) as c:
        assert c.s3 is not None and c.s3.startswith("http://")
        admin = c.client()
        admin.mkdir("/shared", parents=True)
        admin.chown("/shared", "alice", "eng")
        admin.mkdir("/private", parents=True)
        admin.chown("/private", "alice", "eng")
        admin.chmod("/private", 0o700)
        yield c


def test_keys_act_as_their_users_under_thaw_permissions(secured) -> None:
    c = secured
    alice_key = new_key(c, "--user", "alice", "--groups", "eng")
    bob_key = new_key(c, "--user", "bob", "--groups", "ops")
    assert alice_key["access_key"].startswith("TK") and len(alice_key["secret_key"]) == 40
    alice, bob = s3(c, alice_key), s3(c, bob_key)

    # alice writes where she may; what she writes is hers, as any client's.
    alice.put_object(Bucket="shared", Key="a/x.csv", Body=b"1,2,3\n")
    alice.put_object(Bucket="private", Key="secret.txt", Body=b"alice only")
    admin = c.client()
    info = admin.stat("/shared/a/x.csv")
    assert (info["owner"], info["group"]) == ("alice", "eng"), info
    home = admin.stat("/.thaw-gateway/u/alice")
    assert (home["owner"], home["mode"]) == ("alice", "700"), home

    # bob reads what others may read, and nothing else; he writes nowhere.
    assert bob.get_object(Bucket="shared", Key="a/x.csv")["Body"].read() == b"1,2,3\n"
    denied = ("AccessDenied", 403)
    fails(denied, lambda: bob.get_object(Bucket="private", Key="secret.txt"))
    fails(denied, lambda: bob.put_object(Bucket="shared", Key="a/bob.csv", Body=b"no"))
    fails(denied, lambda: bob.delete_object(Bucket="shared", Key="a/x.csv"))
    fails(denied, lambda: bob.create_bucket(Bucket="bobs"))
    assert admin.cat("/shared/a/x.csv") == b"1,2,3\n"
    # bob's failed PUT left nothing staged.
    assert [e["path"] for e in admin.ls("/.thaw-gateway/u/bob")] == []

    # An upload is its user's: bob cannot see, finish or abort alice's.
    up = alice.create_multipart_upload(Bucket="shared", Key="big.bin")["UploadId"]
    upload = {"Bucket": "shared", "Key": "big.bin", "UploadId": up}
    fails(("NoSuchUpload", 404), lambda: bob.abort_multipart_upload(**upload))
    fails(("NoSuchUpload", 404), lambda: bob.list_parts(**upload))
    alice.abort_multipart_upload(Bucket="shared", Key="big.bin", UploadId=up)

    # Unsigned, unknown and wrongly signed requests are refused.
    fails(denied, lambda: s3(c, None).get_object(Bucket="shared", Key="a/x.csv"))
    nobody = {"access_key": "TKNOSUCHKEY000000000", "secret_key": "x" * 40}
    fails(("InvalidAccessKeyId", 403), lambda: s3(c, nobody).list_buckets())
    forged = {**alice_key, "secret_key": bob_key["secret_key"]}
    fails(("SignatureDoesNotMatch", 403), lambda: s3(c, forged).list_buckets())
    # The thaw API too: unsigned is refused, signed acts as the key's user.
    unsigned = urllib.request.Request(f"{c.s3}/?thaw=job&job=j", method="GET")
    with pytest.raises(urllib.error.HTTPError) as http_err:
        urllib.request.urlopen(unsigned, timeout=30)
    assert http_err.value.code == 403
    status, body = signed_api(c, bob_key, "POST", "migrate&bucket=private&prefix=&job=bobs")
    assert status == 403 and "AccessDenied" in body["error"], body


def test_presigned_urls_work_until_they_expire(secured) -> None:
    c = secured
    key = new_key(c, "--user", "alice", "--groups", "eng")
    alice = s3(c, key)
    alice.put_object(Bucket="shared", Key="p/report.txt", Body=b"presigned bytes")
    url = alice.generate_presigned_url(
        "get_object", Params={"Bucket": "shared", "Key": "p/report.txt"}, ExpiresIn=60
    )
    with urllib.request.urlopen(url, timeout=30) as r:
        assert r.read() == b"presigned bytes"
    # A presigned PUT writes as the key's user.
    put = alice.generate_presigned_url(
        "put_object", Params={"Bucket": "shared", "Key": "p/up.txt"}, ExpiresIn=60
    )
    with urllib.request.urlopen(urllib.request.Request(put, data=b"uploaded", method="PUT"), timeout=30) as r:
        assert r.status == 200
    assert c.client().stat("/shared/p/up.txt")["owner"] == "alice"
    # Altered, or expired: refused.
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(url.replace("report", "other"), timeout=30)
    assert e.value.code == 403
    short = alice.generate_presigned_url(
        "get_object", Params={"Bucket": "shared", "Key": "p/report.txt"}, ExpiresIn=1
    )
    time.sleep(2.5)
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(short, timeout=30)
    assert e.value.code == 403 and b"expired" in e.value.read().lower()


def test_users_manage_their_own_keys_and_a_deleted_key_stops_working(secured) -> None:
    c = secured
    admin = c.client()
    carol_token = admin.issue_token("carol", ["eng"], hours=1)
    dave_token = admin.issue_token("dave", ["ops"], hours=1)
    # carol makes her own key (in her own groups); not one for someone else.
    mine = new_key(c, token=carol_token)
    assert (mine["user"], mine["groups"]) == ("carol", ["eng"])
    r = cli(c, "auth", "s3-key", "create", "--user", "dave", token=carol_token)
    assert r.returncode != 0 and "superuser" in r.stderr, r.stderr
    # Each sees their own keys; the administrator sees all; secrets never.
    listed = json.loads(cli(c, "auth", "s3-key", "list", "--json", token=carol_token).stdout)
    assert [k["access_key"] for k in listed] == [mine["access_key"]]
    assert "secret_key" not in listed[0]
    assert json.loads(cli(c, "auth", "s3-key", "list", "--json", token=dave_token).stdout) == []
    everyone = json.loads(cli(c, "auth", "s3-key", "list", "--json").stdout)
    assert mine["access_key"] in [k["access_key"] for k in everyone]
    # dave cannot delete carol's key (it is not his to know of).
    r = cli(c, "auth", "s3-key", "delete", mine["access_key"], token=dave_token)
    assert r.returncode != 0 and "no S3 key" in r.stderr, r.stderr

    carol = s3(c, mine)
    carol.list_buckets()
    r = cli(c, "auth", "s3-key", "delete", mine["access_key"], token=carol_token)
    assert r.returncode == 0, r.stderr
    # Gateways believe a key for a few seconds, then refuse it.
    deadline = time.monotonic() + 15
    while True:
        try:
            carol.list_buckets()
        except ClientError as e:
            assert e.response["Error"]["Code"] == "InvalidAccessKeyId", e.response
            break
        assert time.monotonic() < deadline, "a deleted key still works"
        time.sleep(0.5)
    # Bad input: a job id with control characters, an unknown key.
    assert cli(c, "auth", "s3-key", "set-job", "TKNOSUCH", "j").returncode != 0
    r = cli(c, "auth", "s3-key", "create", "--user", "eve", "--job", "a\nb")
    assert r.returncode != 0 and "control" in r.stderr, r.stderr


def test_a_keys_default_job_counts_its_reads(secured) -> None:
    c = secured
    writer = s3(c, new_key(c, "--user", "alice", "--groups", "eng"))
    bodies = {f"train/s-{i}.bin": os.urandom(MIB + 100 * i) for i in range(2)}
    for k, b in bodies.items():
        writer.put_object(Bucket="shared", Key=k, Body=b)
    # A loader that cannot set headers gets a key whose requests are job "epoch".
    loader_key = new_key(c, "--user", "alice", "--groups", "eng", "--job", "epoch")
    status, info = signed_api(
        c, loader_key, "POST", "migrate&bucket=shared&prefix=train/&job=epoch&lease=120"
    )
    assert status == 200 and info["bytes"] == sum(len(b) for b in bodies.values()), info
    loader = s3(c, loader_key)
    for k, b in bodies.items():
        assert loader.get_object(Bucket="shared", Key=k)["Body"].read() == b
    deadline = time.monotonic() + 30
    while (job := signed_api(c, loader_key, "GET", "job&job=epoch")[1])["read_bytes"] < info["bytes"]:
        assert time.monotonic() < deadline, job
        time.sleep(0.1)
    # Cleared, the key names no job any more.
    assert cli(c, "auth", "s3-key", "set-job", loader_key["access_key"], "").returncode == 0
    listed = json.loads(cli(c, "auth", "s3-key", "list", "--json").stdout)
    assert [k["job"] for k in listed if k["access_key"] == loader_key["access_key"]] == [""]
    assert signed_api(c, loader_key, "POST", "evict&job=epoch")[0] == 200


def test_keys_outlive_a_restart_and_the_gateway_speaks_https(tmp_path: Path) -> None:
    secret = _secret(tmp_path)
    state = tmp_path / "state"
    ufs = tmp_path / "ufs"
    opts: dict[str, Any] = {
        "workers": 1,
        "mem_capacity": "64MiB",
        "secret_file": secret,
        "s3_port": 0,
        "ufs": ufs,
    }
    with thaw.LocalCluster(state_dir=state, **opts) as c:
        c.client().mkdir("/kept", parents=True)
        key = new_key(c, "--user", "thaw")
        s3(c, key).put_object(Bucket="kept", Key="k", Body=b"kept")
        s3(c, key).put_object(Bucket="kept", Key="gone", Body=b"x" * 1000)
    with thaw.LocalCluster(state_dir=state, tls=True, **opts) as c:
        assert c.s3 is not None and c.s3.startswith("https://"), c.s3
        # The key, from the journal, signs requests to the restarted cluster.
        assert s3(c, key).get_object(Bucket="kept", Key="k")["Body"].read() == b"kept"
        # An object whose only copy is gone is an S3 error, not a cut body.
        (ufs / "kept" / "gone").unlink()
        with pytest.raises(ClientError) as e:
            s3(c, key).get_object(Bucket="kept", Key="gone")
        assert code(e) == ("InternalError", 500) and "gone" in str(e.value)
        # Plain HTTP to the HTTPS port gets no answer it could mistake.
        with pytest.raises(Exception):  # noqa: B017
            s3(c, key, endpoint_url=c.s3.replace("https://", "http://")).list_buckets()


def test_the_cli_gateway_needs_the_secret_and_then_serves_keys(secured) -> None:
    c = secured
    env = {k: v for k, v in os.environ.items() if not k.startswith("THAW_")}
    cmd = [thaw.cluster.find_binary(), "gateway", "--master", c.master, "--port", "0"]
    # Without the secret it could check no signature: it says so and stops.
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and "--secret-file" in r.stderr, r.stderr
    with cli_gateway(c.master, "--secret-file", str(c.secret_file), env=env) as endpoint:
        key = new_key(c, "--user", "alice", "--groups", "eng")
        gw = s3(c, key, endpoint_url=endpoint)
        gw.put_object(Bucket="shared", Key="cli/x", Body=b"via the CLI gateway")
        assert c.client().stat("/shared/cli/x")["owner"] == "alice"
        fails(("AccessDenied", 403), lambda: s3(c, None, endpoint_url=endpoint).list_buckets())
