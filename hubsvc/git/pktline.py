"""Git's pkt-line framing: enough to know where packets end, and to write an error git shows."""

from __future__ import annotations

_HEX = frozenset(b"0123456789abcdef")


def pkt_line(text: str) -> bytes:
    """One pkt-line: four hex digits of length, then the payload."""
    data = text.encode()
    return f"{len(data) + 4:04x}".encode() + data


def error_packet(message: str, sideband: bool) -> bytes:
    """A fatal error as git reads it: band 3 when multiplexed, else an ERR packet."""
    text = message.strip().replace("\n", " ")[:900]
    payload = (b"\x03" if sideband else b"ERR ") + text.encode("utf-8", "replace") + b"\n"
    return f"{len(payload) + 4:04x}".encode() + payload + (b"0000" if sideband else b"")


class Framer:
    """Follows a stream of pkt-lines, so an error is only ever written between two packets."""

    def __init__(self) -> None:
        self.header = b""  # the length digits read so far of the next packet
        self.remaining = 0  # payload bytes still to come of the current packet
        self.framed = True  # False once the stream is not pkt-lines (then never write)

    @property
    def at_boundary(self) -> bool:
        """True when the bytes so far end exactly after a whole packet."""
        return self.framed and not self.header and self.remaining == 0

    def feed(self, chunk: bytes) -> None:
        """Account for bytes written to the client."""
        i, size = 0, len(chunk)
        while i < size and self.framed:
            if self.remaining:
                step = min(self.remaining, size - i)
                self.remaining -= step
                i += step
                continue
            need = 4 - len(self.header)
            self.header += chunk[i : i + need]
            i += need
            if len(self.header) < 4:
                return
            if not set(self.header) <= _HEX:
                self.framed = False
                return
            length = int(self.header, 16)
            self.header = b""
            if length > 4:
                self.remaining = length - 4
            elif length == 3:  # no valid packet is three bytes long
                self.framed = False
