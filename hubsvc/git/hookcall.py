"""The pre-receive hook's question to the server: may these ref updates land?

Run by the pre-receive hook as a script (`python -I -S hookcall.py`): it sends git's ref
updates and the quarantine's whereabouts to the socket the server named in the hook's
environment, with the push's secret, and prints the server's answer, which git shows
the pusher as `remote: …`. Exit 0 lets the push on, 1 refuses it whole; no answer
refuses it too. It imports only what starts fast (`_socket`, not `socket` and its
enums, no json: 11 ms against 27 here), since every push waits for it.

The question, in lines: the secret, then NAME=value of the quarantine's variables and
of the push's request id, an empty line, then git's "old new ref" lines. The answer: "ok" or "refused", then the
lines to print.
"""

import _socket
import os
import sys

# Where receive-pack keeps the pushed objects until the hook says yes: the server reads
# them there (a force-push check needs the new commits).
QUARANTINE = ("GIT_OBJECT_DIRECTORY", "GIT_ALTERNATE_OBJECT_DIRECTORIES", "GIT_QUARANTINE_PATH")
# The id of the request that runs the push (requestid.ENV): the server's lines about its
# decision carry it, whichever task answers the socket.
REQUEST_ID = "HUBSVC_REQUEST_ID"


def main() -> int:
    """Ask, print the answer, exit 0 (accepted) or 1 (refused)."""
    path = os.environ.get("HUBSVC_HOOK_SOCKET", "")
    secret = os.environ.get("HUBSVC_HOOK_SECRET", "")
    if not path or not secret:
        print("hubsvc: this push did not come through the server: refused")
        return 1
    env = "".join(
        f"{name}={os.environ[name]}\n" for name in (*QUARANTINE, REQUEST_ID) if name in os.environ
    )
    question = f"{secret}\n{env}\n".encode() + sys.stdin.buffer.read()
    chunks = []
    try:
        sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
        try:
            sock.connect(path)
            sock.sendall(question)
            sock.shutdown(_socket.SHUT_WR)
            while chunk := sock.recv(65536):
                chunks.append(chunk)
        finally:
            sock.close()
    except OSError as exc:
        print(f"hubsvc: the server could not be asked about this push ({exc}): refused")
        return 1
    verdict, _, said = b"".join(chunks).decode("utf-8", "replace").partition("\n")
    sys.stdout.write(said)
    return 0 if verdict == "ok" else 1


if __name__ == "__main__":
    sys.exit(main())
