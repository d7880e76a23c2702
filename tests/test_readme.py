"""README works as written: its runnable shell blocks against a real server, its nginx file
under `nginx -t`, and its install commands pointing at what exists.

A fenced ```sh block preceded by the line `<!-- runnable -->` is runnable: the blocks run in
README's order as one bash session (so a variable set in one block serves the next), with
`localhost:8080` pointed at the test's server, and curl failing on any HTTP error.
"""

from __future__ import annotations

import configparser
import datetime
import os
import re
import shlex
import shutil
import subprocess

import pytest

from .server import ROOT, ServerProcess

README = (ROOT / "README.md").read_text()
MARK = "<!-- runnable -->"
FENCE = re.compile(r"^```(\w*)\n(.*?)^```$", re.M | re.S)


def section(title: str) -> str:
    """The text of README's `## title` section, up to the next `## ` heading."""
    start = README.index(f"\n## {title}\n")
    end = README.find("\n## ", start + 1)
    return README[start : end if end != -1 else None]


def blocks(text: str, lang: str) -> list[tuple[bool, str]]:
    """(marked runnable, code) of every fenced block of `lang` in text, in order."""
    return [
        (text[: m.start()].rstrip().endswith(MARK), m[2])
        for m in FENCE.finditer(text)
        if m[1] == lang
    ]


def runnable() -> list[str]:
    return [code for marked, code in blocks(README, "sh") if marked]


def test_every_block_of_the_walkthrough_is_marked_runnable():
    walkthrough = blocks(section("Trying it with curl"), "sh")
    assert walkthrough and all(marked for marked, _ in walkthrough)


@pytest.mark.skipif(
    not (shutil.which("curl") and shutil.which("git")), reason="needs curl and git on PATH"
)
def test_runnable_blocks_succeed_in_order_against_a_real_server(tmp_path):
    server = ServerProcess(tmp_path / "data").start()
    try:
        # curl exits non-zero on an HTTP error only when asked: a shim on PATH asks, so a
        # 4xx in any step fails the run (the README's readers see the error body).
        shim = tmp_path / "bin"
        shim.mkdir()
        (shim / "curl").write_text(
            f'#!/bin/sh\nexec {shlex.quote(shutil.which("curl"))} --fail-with-body "$@"\n'
        )
        (shim / "curl").chmod(0o755)
        script = "\n".join(runnable()).replace("localhost:8080", f"127.0.0.1:{server.port}")
        home = tmp_path / "home"  # a fresh machine: no git or curl configuration
        (home / "work").mkdir(parents=True)
        proc = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", script],
            cwd=home / "work",
            capture_output=True,
            text=True,
            timeout=120,
            env={
                "PATH": f"{shim}{os.pathsep}{os.environ['PATH']}",
                "HOME": str(home),
                "GIT_TERMINAL_PROMPT": "0",
                "GIT_CONFIG_NOSYSTEM": "1",
                "LANG": "C.UTF-8",
            },
        )
    finally:
        server.stop()
    assert proc.returncode == 0, f"{proc.stdout}\n{proc.stderr}"
    assert '"error"' not in proc.stdout
    # What the walkthrough says it does, it did.
    assert (home / "work" / "me.png").is_file()
    assert (home / "work" / "hello" / ".git").is_dir()
    assert '"username": "ada"' in proc.stdout or '"username":"ada"' in proc.stdout
    assert '"title": "First issue"' in proc.stdout or '"title":"First issue"' in proc.stdout


def test_install_commands_parse_and_name_what_exists():
    first, second = [code for _, code in blocks(README[: README.index("\n## ")], "sh")]
    for code in (first, second):
        subprocess.run(["bash", "-n", "-c", code], check=True)
        assert "python -m pip install -e " in code
    assert (ROOT / "run.py").is_file() and "python run.py" in first
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "setup.cfg")
    extra = re.search(r"\.\[(\w+)\]", second)[1]
    assert extra in cfg["options.extras_require"]
    assert "testpaths = tests" in (ROOT / "setup.cfg").read_text()
    # CI runs the second command verbatim, in a fresh virtual environment.
    ci = (ROOT / ".ci" / "run").read_text()
    assert second.split("&& ", 2)[2].strip() in ci


def _self_signed(folder) -> tuple[str, str]:
    """A throwaway certificate and key for nginx to load."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "git.example.com")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(1)
        .not_valid_before(now)
        .not_valid_after(now + datetime.timedelta(days=1))
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = folder / "cert.pem", folder / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return str(cert_path), str(key_path)


@pytest.mark.skipif(not shutil.which("nginx"), reason="nginx is not installed")
@pytest.mark.parametrize(
    "heading", ["Running behind a reverse proxy", "Several processes: PostgreSQL and Redis"]
)
def test_nginx_snippet_passes_nginx_t(tmp_path, heading):
    [(_, snippet)] = blocks(section(heading), "nginx")
    cert, key = _self_signed(tmp_path)
    # Only the files it names move into tmp_path: the certificate and the access log.
    files = {"ssl_certificate": cert, "ssl_certificate_key": key}
    snippet = re.sub(
        r"^(\s*(ssl_certificate|ssl_certificate_key)\s+)\S+;",
        lambda m: f"{m[1]}{files[m[2]]};",
        snippet,
        flags=re.M,
    )
    snippet = re.sub(r"^(\s*access_log\s+)\S+", rf"\g<1>{tmp_path}/hubsvc.log", snippet, flags=re.M)
    (tmp_path / "hubsvc.conf").write_text(snippet)
    temp = "".join(
        f"    {kind}_temp_path {tmp_path}/{kind};\n"
        for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
    )
    conf = tmp_path / "nginx.conf"
    conf.write_text(
        f"pid {tmp_path}/nginx.pid;\nerror_log {tmp_path}/error.log;\n"
        f"events {{}}\nhttp {{\n{temp}    include {tmp_path}/hubsvc.conf;\n}}\n"
    )
    proc = subprocess.run(
        ["nginx", "-t", "-p", str(tmp_path), "-e", str(tmp_path / "error.log"), "-c", str(conf)],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert proc.returncode == 0, proc.stderr


def test_systemd_unit_signals_run_py_alone_and_outwaits_the_drain():
    from hubsvc.config import DEFAULTS

    [(_, unit)] = blocks(section("Operating"), "ini")
    cfg = configparser.ConfigParser(interpolation=None, strict=False)
    cfg.optionxform = str  # type: ignore[assignment,method-assign]
    cfg.read_string(unit)
    service = cfg["Service"]
    assert service["KillSignal"] == "SIGTERM" and service["KillMode"] == "mixed"
    assert int(service["TimeoutStopSec"]) > DEFAULTS["server"]["drain_seconds"]
    assert "run.py" in service["ExecStart"] and "--port %i" in service["ExecStart"]
