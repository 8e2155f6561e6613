"""The few IPv4 packets a sealed namespace's TUN device carries that the watch answers: read
what a packet asks for (a TCP connection, a DNS lookup, another UDP or ICMP send), and write
the refusal that makes the program fail at once instead of waiting on a timeout: a TCP reset
for a connection, a DNS answer REFUSED for a lookup.
"""

from __future__ import annotations

import socket
import struct
from dataclasses import dataclass

TCP, UDP, ICMP = 6, 17, 1
_SYN, _ACK, _RST = 0x02, 0x10, 0x04
_ICMP_ECHO = 8
_DNS_REFUSED = 5


@dataclass(frozen=True)
class Packet:
    """An IPv4 packet's addresses and what it carries."""

    protocol: int
    source: str
    destination: str
    source_port: int = 0
    destination_port: int = 0
    syn: bool = False  # a TCP packet opening a connection (SYN, no ACK)
    echo: bool = False  # an ICMP echo request (ping)
    payload: bytes = b""  # what a UDP datagram carries
    raw: bytes = b""


def parse(data: bytes) -> Packet | None:
    """The packet in ``data``, or None when it is not IPv4 or too short to read."""
    if len(data) < 20 or data[0] >> 4 != 4:
        return None
    header = (data[0] & 0x0F) * 4
    protocol = data[9]
    source, destination = socket.inet_ntoa(data[12:16]), socket.inet_ntoa(data[16:20])
    body = data[header:]
    if protocol == TCP and len(body) >= 20:
        sport, dport = struct.unpack("!HH", body[:4])
        flags = body[13]
        return Packet(TCP, source, destination, sport, dport,
                      syn=bool(flags & _SYN) and not flags & _ACK, raw=data)
    if protocol == UDP and len(body) >= 8:
        sport, dport = struct.unpack("!HH", body[:4])
        return Packet(UDP, source, destination, sport, dport, payload=body[8:], raw=data)
    if protocol == ICMP and body:
        return Packet(ICMP, source, destination, echo=body[0] == _ICMP_ECHO, raw=data)
    return Packet(protocol, source, destination, raw=data)


def _checksum(data: bytes) -> int:
    if len(data) % 2:
        data += b"\0"
    total = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def _ip(protocol: int, source: str, destination: str, body: bytes) -> bytes:
    header = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(body), 0, 0x4000, 64, protocol, 0,
                         socket.inet_aton(source), socket.inet_aton(destination))
    return header[:10] + struct.pack("!H", _checksum(header)) + header[12:] + body


def reset(syn: Packet) -> bytes:
    """The TCP reset that refuses the connection ``syn`` opens (``connect`` fails with
    ECONNREFUSED at once), as if sent by the host it was for."""
    header = (syn.raw[0] & 0x0F) * 4
    sequence = struct.unpack("!I", syn.raw[header + 4:header + 8])[0]
    segment = struct.pack("!HHIIBBHHH", syn.destination_port, syn.source_port, 0,
                          (sequence + 1) & 0xFFFFFFFF, 5 << 4, _RST | _ACK, 0, 0, 0)
    pseudo = struct.pack("!4s4sBBH", socket.inet_aton(syn.destination),
                         socket.inet_aton(syn.source), 0, TCP, len(segment))
    segment = segment[:16] + struct.pack("!H", _checksum(pseudo + segment)) + segment[18:]
    return _ip(TCP, syn.destination, syn.source, segment)


def question(query: bytes) -> str | None:
    """The name a DNS query asks about, or None when ``query`` is not one."""
    if len(query) < 12 or query[2] & 0x80 or struct.unpack("!H", query[4:6])[0] < 1:
        return None
    labels, at = [], 12
    while at < len(query) and (size := query[at]):
        if size > 63 or at + 1 + size > len(query):
            return None
        labels.append(query[at + 1:at + 1 + size].decode("ascii", "replace"))
        at += 1 + size
    return ".".join(labels) if labels else None


def refused(query: bytes) -> bytes:
    """The answer REFUSED to the DNS ``query``: its id and question, no records (a resolver
    gives up on that server at once)."""
    end = 12
    while end < len(query) and query[end]:
        end += 1 + query[end]
    end = min(len(query), end + 5)  # the name's last zero, the type and the class
    flags = 0x8000 | (query[2] & 0x79) << 8 | 0x80 | _DNS_REFUSED  # QR, opcode and RD kept, RA
    return query[:2] + struct.pack("!HHHHH", flags, 1, 0, 0, 0) + query[12:end]


def answer_to(query: Packet) -> bytes:
    """A DNS answer REFUSED to the query ``query`` carries, sent back from its server."""
    body = refused(query.payload)
    datagram = struct.pack("!HHHH", query.destination_port, query.source_port, 8 + len(body),
                           0) + body  # checksum 0: none, which IPv4 allows
    return _ip(UDP, query.destination, query.source, datagram)
