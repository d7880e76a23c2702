"""Sign-in time for a known username (wrong password) and an unknown one.

    python benchmarks/bench_sign_in.py [--rounds 20] [--bcrypt-rounds 12]

Starts hubsvc at the production bcrypt cost (12 by default, not the benchmarks' 4),
signs up one user, then times interleaved sign-ins: a wrong password for the real
username, and any password for a username that does not exist. Both should cost one
bcrypt of the configured cost, so the medians should match: a gap would tell an
attacker which usernames exist.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import Server, request_json, sign_up


def timed(url: str, username: str) -> float:
    """Seconds one failed sign-in takes, end to end."""
    started = time.perf_counter()
    status, body = request_json(
        url + "/auth/sign-in", "POST", {"username": username, "password": "not the password"}
    )
    elapsed = time.perf_counter() - started
    if status != 401:
        raise RuntimeError(f"expected 401, got {status}: {body}")
    return elapsed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--bcrypt-rounds", type=int, default=12)
    args = parser.parse_args(argv)
    settings = {"security": {"bcrypt_rounds": args.bcrypt_rounds}, "rate_limit": {"enabled": False}}
    with Server(settings) as server:
        sign_up(server.url, "known")
        timed(server.url, "known"), timed(server.url, "nobody")  # warm-up, unmeasured
        known, unknown = [], []
        for n in range(args.rounds):
            # Interleaved, in alternating order, so drift hits both alike.
            pair = [("known", known), ("nobody", unknown)]
            for username, into in pair if n % 2 == 0 else pair[::-1]:
                into.append(timed(server.url, username))
        for name, values in (("known", known), ("unknown", unknown)):
            print(f"# {name}: " + " ".join(f"{v * 1000:.0f}" for v in values))
        k, u = statistics.median(known), statistics.median(unknown)
        print(
            f"sign-in, known username, wrong password: {k * 1000:.1f} ms median "
            f"(bcrypt cost {args.bcrypt_rounds}, {args.rounds} sign-ins)"
        )
        print(f"sign-in, unknown username: {u * 1000:.1f} ms median (ratio {u / k:.2f} vs known)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
