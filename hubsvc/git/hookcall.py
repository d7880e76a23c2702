"""The pre-receive hook's question to the server: may these ref updates land?

Run by the pre-receive hook as a script (`python -I -S hookcall.py`, standard library
only, so it starts in milliseconds): it sends git's ref updates and the quarantine's
whereabouts to the socket the server named in the hook's environment, with the push's
secret, and prints the server's answer, which git shows the pusher as `remote: …`.
Exit 0 lets the push on, 1 refuses it whole. No answer refuses it too.
"""

import json
import os
import socket
import sys

# Where receive-pack keeps the pushed objects until the hook says yes: the server reads
# them there (a force-push check needs the new commits).
QUARANTINE = ("GIT_OBJECT_DIRECTORY", "GIT_ALTERNATE_OBJECT_DIRECTORIES", "GIT_QUARANTINE_PATH")


def main() -> int:
    """Ask, print the answer, exit 0 (accepted) or 1 (refused)."""
    path = os.environ.get("HUBSVC_HOOK_SOCKET", "")
    secret = os.environ.get("HUBSVC_HOOK_SECRET", "")
    if not path or not secret:
        print("hubsvc: this push did not come through the server: refused")
        return 1
    updates = [line.split(" ", 2) for line in sys.stdin.read().splitlines() if line.count(" ") >= 2]
    question = {
        "secret": secret,
        "updates": updates,
        "env": {name: os.environ[name] for name in QUARANTINE if name in os.environ},
    }
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.connect(path)
            sock.sendall(json.dumps(question).encode() + b"\n")
            sock.shutdown(socket.SHUT_WR)
            data = b""
            while chunk := sock.recv(65536):
                data += chunk
        answer = json.loads(data)
    except (OSError, ValueError) as exc:
        print(f"hubsvc: the server could not be asked about this push ({exc}): refused")
        return 1
    for line in answer.get("lines", []):
        print(line)
    return 0 if answer.get("ok") is True else 1


if __name__ == "__main__":
    sys.exit(main())
