"""A cluster with a secret, from Python: strangers are refused, users hold
their own files, and credentials reach pandas (fsspec) and other processes
through a token."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

import thaw
from thaw.errors import PermissionDenied


def _secret(tmp_path: Path) -> Path:
    path = tmp_path / "secret"
    subprocess.run([thaw.cluster.find_binary(), "auth", "secret", str(path)], check=True, capture_output=True)
    return path


def test_a_secured_cluster_refuses_strangers_and_keeps_users_apart(tmp_path: Path) -> None:
    with thaw.LocalCluster(workers=1, mem_capacity="64MiB", secret_file=_secret(tmp_path)) as c:
        # This process started the cluster: its clients use its secret, as the
        # OS user the master runs as (a superuser).
        admin = c.client()
        me = admin.whoami()
        assert me["security"] and me["superuser"], me
        admin.mkdir("/home/alice", parents=True)
        admin.chown("/home/alice", "alice", "eng")
        alice_token = admin.issue_token("alice", ["eng"], hours=1)
        bob_token = admin.issue_token("bob", ["ops"], hours=1)

        stranger = thaw.Client(c.master, token="thaw1.not.valid")
        with pytest.raises(PermissionDenied, match="malformed token"):
            stranger.ls("/")

        # pandas writes and reads through fsspec as alice.
        df = pd.DataFrame({"x": range(1000), "y": [f"v{i}" for i in range(1000)]})
        opts = {"master": c.master, "token": alice_token}
        df.to_parquet("thaw:///home/alice/t.parquet", storage_options=opts)
        alice = thaw.Client(c.master, token=alice_token)
        alice.chmod("/home/alice/t.parquet", 0o600)
        info = alice.stat("/home/alice/t.parquet")
        assert (info["owner"], info["group"], info["mode"]) == ("alice", "eng", "600")
        back = pd.read_parquet("thaw:///home/alice/t.parquet", storage_options=opts)
        pd.testing.assert_frame_equal(back, df)

        bob = thaw.Client(c.master, token=bob_token)
        with pytest.raises(PermissionDenied, match=r"bob may not read /home/alice/t\.parquet"):
            bob.cat("/home/alice/t.parquet")
        with pytest.raises(PermissionError):
            as_bob = {"master": c.master, "token": bob_token}
            pd.read_parquet("thaw:///home/alice/t.parquet", storage_options=as_bob)

        # Another process gets alice's credentials from THAW_TOKEN alone.
        code = (
            "import pandas as pd, sys; "
            "df = pd.read_parquet('thaw:///home/alice/t.parquet', storage_options={'master': sys.argv[1]}); "
            "print(len(df))"
        )
        env = {k: v for k, v in os.environ.items() if not k.startswith("THAW_")}
        run = subprocess.run(
            [sys.executable, "-c", code, c.master], env={**env, "THAW_TOKEN": alice_token},
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert run.returncode == 0 and run.stdout.strip() == "1000", run.stderr
        run = subprocess.run(
            [sys.executable, "-c", code, c.master], env=env, capture_output=True, text=True, timeout=60
        )
        assert run.returncode != 0 and "requires credentials" in run.stderr, run.stderr


def test_a_cluster_over_tls_with_a_secret_serves_pandas(tmp_path: Path) -> None:
    with thaw.LocalCluster(workers=1, mem_capacity="64MiB", secret_file=_secret(tmp_path), tls=True) as c:
        assert c.tls_ca is not None
        df = pd.DataFrame({"k": range(500)})
        df.to_parquet("thaw:///t.parquet", storage_options={"master": c.master})
        pd.testing.assert_frame_equal(
            pd.read_parquet("thaw:///t.parquet", storage_options={"master": c.master}), df
        )
        assert c.client().whoami()["security"]
        # Another process needs the CA (and credentials): without the CA it
        # cannot speak to the master at all.
        code = "import thaw, sys; print(len(thaw.Client(sys.argv[1]).cat('/t.parquet')))"
        env = {k: v for k, v in os.environ.items() if not k.startswith("THAW_")}
        token = c.client().issue_token(hours=1)
        run = subprocess.run(
            [sys.executable, "-c", code, c.master], env={**env, "THAW_TOKEN": token, "THAW_TLS_CA": c.tls_ca},
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert run.returncode == 0 and int(run.stdout) > 0, run.stderr
        run = subprocess.run(
            [sys.executable, "-c", code, c.master], env={**env, "THAW_TOKEN": token},
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert run.returncode != 0 and "THAW_TLS_CA" in run.stderr, run.stderr
