"""SSH benchmark: clone and push of a 5,000-commit repository over hubsvc's SSH against sshd.

    python benchmarks/bench_ssh.py [--rounds 5 --commits 5000 --files 500]

Generates a bare repository with make_repo.py, signs up one user, registers a fresh
Ed25519 key through the API, creates a repository and pushes the history into it over
hubsvc's SSH port. The baseline is OpenSSH's own server: a throwaway `sshd -f CONFIG -p
PORT -D` with its own host key and an authorized_keys of the same key, whose sessions
run the stock `git-upload-pack` / `git-receive-pack` as the current user. Round after
round (the order alternating):

1. `git clone --bare -q` of the repository through hubsvc's SSH ÷ through sshd reading
   the very same bare folder under <data_dir>/repositories/. Target ≤ 1.1.
2. `git push -q` of `main` into a fresh empty repository on each side (created through
   the API on hubsvc, `git init --bare` for sshd). Target ≤ 1.2.

Both clients are the stock `ssh` with the same options (a new connection per git
command, no ControlMaster), so each figure includes the key exchange and the key check.

Exit code 0 when both targets are met, 1 when one is not, 2 when sshd is missing.
"""

from __future__ import annotations

import argparse
import getpass
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import harness
from bench_git import client_env, run
from make_repo import make_repo

CLONE_TARGET = 1.1
PUSH_TARGET = 1.2
USERNAME = "bench"
PASSWORD = "bench-password-1"
SSHD = shutil.which("sshd") or "/usr/sbin/sshd"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds (5)")
    parser.add_argument("--commits", type=int, default=5000, help="generated commits (5000)")
    parser.add_argument("--files", type=int, default=500, help="generated files (500)")
    return parser.parse_args(argv)


def start_sshd(folder: Path, key_line: str) -> tuple[subprocess.Popen, int]:
    """A throwaway sshd on a free port: its own host key, the benchmark key authorized."""
    port = harness.free_port()
    host_key = folder / "host_ed25519"
    run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(host_key)])
    (folder / "authorized_keys").write_text(key_line + "\n")
    config = folder / "sshd_config"
    config.write_text(
        "\n".join(
            [
                "ListenAddress 127.0.0.1",
                f"HostKey {host_key}",
                f"AuthorizedKeysFile {folder / 'authorized_keys'}",
                f"PidFile {folder / 'sshd.pid'}",
                "PasswordAuthentication no",
                "KbdInteractiveAuthentication no",
                "UsePAM no",
                "PermitRootLogin yes",
                "StrictModes no",
                "PrintMotd no",
            ]
        )
        + "\n"
    )
    Path("/run/sshd").mkdir(exist_ok=True)  # its privilege separation folder
    proc = subprocess.Popen(
        [SSHD, "-f", str(config), "-p", str(port), "-D", "-e"],
        stdout=subprocess.DEVNULL,
        stderr=open(folder / "sshd.log", "ab"),
    )
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError((folder / "sshd.log").read_text()[-2000:])
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return proc, port
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise RuntimeError("sshd did not listen")


def timed(cmd: list[str], env: dict[str, str], cwd: Path | None = None) -> float:
    started = time.perf_counter()
    run(cmd, env=env, cwd=cwd)
    return time.perf_counter() - started


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if not os.access(SSHD, os.X_OK):
        print("bench_ssh: needs OpenSSH's sshd (apt-get install -y openssh-server)")
        return 2
    with tempfile.TemporaryDirectory(prefix="bench-ssh-") as tmp:
        root = Path(tmp)
        source = root / "source.git"
        make_repo(source, commits=args.commits, files=args.files)
        key = root / "key"
        run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)])
        key_line = key.with_suffix(".pub").read_text().strip()
        env = client_env(root / "home")
        (root / "home").mkdir()
        env["GIT_SSH_COMMAND"] = (
            f"ssh -i {key} -F /dev/null -o IdentitiesOnly=yes -o BatchMode=yes "
            "-o UserKnownHostsFile=/dev/null -o StrictHostKeyChecking=no -o LogLevel=ERROR"
        )
        port = harness.free_port()
        with harness.Server({"ssh": {"port": port}}) as hub:
            sshd, sshd_port = start_sshd(root, key_line)
            try:
                return bench(args, hub, port, sshd_port, source, root, env, key_line)
            finally:
                sshd.terminate()
                sshd.wait(10)


def bench(
    args: argparse.Namespace,
    hub: harness.Server,
    port: int,
    sshd_port: int,
    source: Path,
    root: Path,
    env: dict[str, str],
    key_line: str,
) -> int:
    token = harness.sign_up(hub.url, USERNAME, PASSWORD)
    auth = harness.bearer(token)
    harness.expect(
        *harness.request_json(
            hub.url + "/api/users/me/keys", "POST", {"title": "bench", "key": key_line}, auth
        ),
        201,
    )
    user = getpass.getuser()

    def new_repo(name: str) -> None:
        harness.expect(
            *harness.request_json(hub.url + "/api/repositories", "POST", {"name": name}, auth),
            201,
        )

    new_repo("bench")
    hub_url = f"ssh://git@127.0.0.1:{port}/{USERNAME}/bench.git"
    run(["git", "push", "-q", "--mirror", hub_url], env=env, cwd=source)
    folders = sorted((hub.data_dir / "repositories").glob("*/*.git"))
    bare = folders[0]  # the one repository: sshd serves the same folder
    sshd_url = f"ssh://{user}@127.0.0.1:{sshd_port}{bare}"
    pushes = root / "sshd-pushes"
    pushes.mkdir()

    times: dict[str, dict[str, list[float]]] = {
        "clone": {"hubsvc": [], "sshd": []},
        "push": {"hubsvc": [], "sshd": []},
    }
    print(
        f"# {args.commits} commits, {args.rounds} rounds (+1 warm-up), load average "
        f"{os.getloadavg()[0]:.2f} at start",
        flush=True,
    )
    for round_no in range(args.rounds + 1):
        order = ["hubsvc", "sshd"] if round_no % 2 == 0 else ["sshd", "hubsvc"]
        for side in order:
            target = root / f"clone-{side}-{round_no}.git"
            url = hub_url if side == "hubsvc" else sshd_url
            elapsed = timed(["git", "clone", "--bare", "-q", url, str(target)], env)
            shutil.rmtree(target)
            if round_no:
                times["clone"][side].append(elapsed)
        for side in order:
            name = f"push-{round_no}"
            if side == "hubsvc":
                new_repo(name)
                url = f"ssh://git@127.0.0.1:{port}/{USERNAME}/{name}.git"
            else:
                folder = pushes / f"{name}.git"
                run(["git", "init", "-q", "--bare", "--initial-branch=main", str(folder)])
                url = f"ssh://{user}@127.0.0.1:{sshd_port}{folder}"
            elapsed = timed(["git", "push", "-q", url, "main"], env, cwd=source)
            if round_no:
                times["push"][side].append(elapsed)
        if round_no:
            print(
                f"#   round {round_no}: "
                + ", ".join(
                    f"{what} {side} {times[what][side][-1] * 1000:.0f} ms"
                    for what in times
                    for side in times[what]
                ),
                flush=True,
            )
    ok = True
    for what, target in (("clone", CLONE_TARGET), ("push", PUSH_TARGET)):
        ours, theirs = (harness.median(times[what][s]) for s in ("hubsvc", "sshd"))
        ratio = ours / theirs
        met = ratio <= target
        ok = ok and met
        print(
            f"ssh {what}: hubsvc {ours * 1000:.0f} ms, sshd {theirs * 1000:.0f} ms "
            f"(ratio {ratio:.2f} vs sshd; target ≤ {target}: {'met' if met else 'NOT met'})",
            flush=True,
        )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
