"""The pre-receive hook's program: ask the server whether the push may land.

Run by the pre-receive hook (`exec python -I -S hookcall.py`, push_hooks.py) with git's
"old new ref" lines on its standard input. It sends them and the quarantine's
whereabouts to the socket the server named in the hook's environment, with the push's
secret, and prints the server's answer, which git shows the pusher as `remote: …`. Exit
0 lets the push on, 1 refuses it whole; no answer refuses it too.

The server decides who may push what, and checks the pushed objects itself
(git/push_checks.py: the size limit and the commit counts of the push events), often
before this hook even starts; so the hook starts no process of its own. It imports
only what starts fast (`_socket`; not `socket`, `subprocess` or json: this script
starts in 10 ms, `subprocess` alone imports in 50).

The question, in lines: the secret, then NAME=value of the quarantine's variables and of
the push's request id, an empty line, then git's "old new ref" lines. The answer: "ok"
or "refused", then the lines to print.
"""

import _socket
import os
import sys

# Where receive-pack keeps the pushed objects until the hook says yes: the server reads
# them there (the size check, the counts, a force-push check).
QUARANTINE = ("GIT_OBJECT_DIRECTORY", "GIT_ALTERNATE_OBJECT_DIRECTORIES", "GIT_QUARANTINE_PATH")
# The id of the request that runs the push (requestid.ENV): the server's lines about its
# decision carry it, whichever task answers the socket.
REQUEST_ID = "HUBSVC_REQUEST_ID"


def _ask(question: bytes) -> _socket.socket:
    """The question sent to the server; its answer is read from the returned socket."""
    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        sock.connect(os.environ["HUBSVC_HOOK_SOCKET"])
        sock.sendall(question)
        sock.shutdown(_socket.SHUT_WR)
    except BaseException:
        sock.close()
        raise
    return sock


def main() -> int:
    """Ask, print the server's lines; exit 0 (accepted) or 1 (refused)."""
    path = os.environ.get("HUBSVC_HOOK_SOCKET", "")
    secret = os.environ.get("HUBSVC_HOOK_SECRET", "")
    if not path or not secret:
        print("hubsvc: this push did not come through the server: refused")
        return 1
    stdin = sys.stdin.buffer.read()
    env = "".join(
        f"{name}={os.environ[name]}\n" for name in (*QUARANTINE, REQUEST_ID) if name in os.environ
    )
    try:
        sock = _ask(f"{secret}\n{env}\n".encode() + stdin)
    except OSError as exc:
        print(f"hubsvc: the server could not be asked about this push ({exc}): refused")
        return 1
    answer = bytearray()
    try:
        while chunk := sock.recv(65536):
            answer += chunk
    except OSError as exc:
        print(f"hubsvc: the server's answer broke off ({exc}): refused")
        return 1
    finally:
        sock.close()
    verdict, _, said = answer.decode("utf-8", "replace").partition("\n")
    sys.stdout.write(said)
    return 0 if verdict == "ok" else 1


if __name__ == "__main__":
    sys.exit(main())
