"""The kernel's part of a sealed replay: the command starts in a network namespace of its own,
where the only interface is a loopback of its own, so nothing it or any program it starts
opens (gRPC's C core, libpq, curl, a Node or Go child) can reach another machine or a port of
this one. Linux only: ``unshare(CLONE_NEWNET)``, in a user namespace of its own as well when
not root (mapping the user to itself, so files and permissions are as before).

Everything happens in the child between fork and exec (:func:`enter`), so no extra process
stands between the command and Rewind: the namespace is made, its loopback brought up, and a
listening socket bound inside it for each endpoint Rewind hands in (the replayed run's
collector, the worker); those sockets are passed back to the parent over a Unix socket pair
(``SCM_RIGHTS``), where :mod:`.relay` accepts on them and carries each connection out.

As root, a TUN device is made there too and the default route goes through it (:func:`_tun`),
so every packet for another machine reaches the parent (:mod:`.watch`), which names it and
answers at once with a refusal, instead of the kernel dropping it unseen. A user namespace
cannot open ``/dev/net/tun``: without root what leaves outside Python is refused unnamed.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import fcntl
import functools
import os
import socket
import struct
import sys
import threading

CLONE_NEWUSER = 0x10000000
CLONE_NEWNET = 0x40000000
_SIOCGIFFLAGS, _SIOCSIFFLAGS, _IFF_UP = 0x8913, 0x8914, 0x1
_SIOCADDRT, _SIOCSIFADDR, _SIOCSIFNETMASK, _IFF_RUNNING, _RTF_UP = 0x890B, 0x8916, 0x891C, 0x40, 1
_TUNSETIFF, _TUNSETPERSIST, _IFF_TUN, _IFF_NO_PI = 0x400454CA, 0x400454CB, 0x0001, 0x1000
TUN_NAME = b"rewind0"
# The address the namespace's packets leave from: IANA's IPv4 dummy address (RFC 7600),
# meant for a host with no other; no program connects to it expecting an answer.
TUN_ADDRESS = "192.0.0.8"


class _Route(ctypes.Structure):
    """``struct rtentry`` (net/route.h), laid out by ctypes for this machine's C ABI."""

    _fields_ = [("rt_pad1", ctypes.c_ulong), ("rt_dst", ctypes.c_char * 16),
                ("rt_gateway", ctypes.c_char * 16), ("rt_genmask", ctypes.c_char * 16),
                ("rt_flags", ctypes.c_ushort), ("rt_pad2", ctypes.c_short),
                ("rt_pad3", ctypes.c_ulong), ("rt_pad4", ctypes.c_void_p),
                ("rt_metric", ctypes.c_short), ("rt_dev", ctypes.c_char_p),
                ("rt_mtu", ctypes.c_ulong), ("rt_window", ctypes.c_ulong),
                ("rt_irtt", ctypes.c_ushort)]


@functools.lru_cache(maxsize=1)
def libc() -> ctypes.CDLL:
    """The C library, loaded in the parent: finding it runs a program, which the child must
    not do between fork and exec."""
    return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)


def _unshare(flags: int) -> None:
    if libc().unshare(ctypes.c_int(flags)) != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"unshare: {os.strerror(code)}")


def _write(path: str, text: str) -> None:
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def _up(sock: socket.socket, name: bytes) -> None:
    request = struct.pack("16sH22x", name, 0)
    flags = struct.unpack("16sH22x", fcntl.ioctl(sock, _SIOCGIFFLAGS, request))[1]
    fcntl.ioctl(sock, _SIOCSIFFLAGS, struct.pack("16sH22x", name, flags | _IFF_UP | _IFF_RUNNING))


def _loopback_up() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        _up(sock, b"lo")


def _inet(address: str) -> bytes:
    """A ``struct sockaddr_in`` for ``address``, as the ioctls take it."""
    return struct.pack("=H", socket.AF_INET) + struct.pack("!H4s8x", 0, socket.inet_aton(address))


def _tun() -> int | None:
    """In the new namespace, as root: a TUN device with the default route through it; its
    file descriptor (packets the namespace sends out are read from it), or None where the
    kernel gives none (no ``/dev/net/tun``, not root)."""
    if os.geteuid() != 0:
        return None
    try:
        fd = os.open("/dev/net/tun", os.O_RDWR | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        fcntl.ioctl(fd, _TUNSETIFF, struct.pack("16sH22x", TUN_NAME, _IFF_TUN | _IFF_NO_PI))
        # Kept past its last descriptor: the device goes with the namespace, in the kernel's
        # background clean-up, rather than at the close that would make the replay wait ~25 ms.
        fcntl.ioctl(fd, _TUNSETPERSIST, 1)
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            fcntl.ioctl(sock, _SIOCSIFADDR, struct.pack("16s16s8x", TUN_NAME, _inet(TUN_ADDRESS)))
            fcntl.ioctl(sock, _SIOCSIFNETMASK,
                        struct.pack("16s16s8x", TUN_NAME, _inet("255.255.255.255")))
            _up(sock, TUN_NAME)
            route = _Route(rt_dst=_inet("0.0.0.0"), rt_genmask=_inet("0.0.0.0"),
                           rt_flags=_RTF_UP, rt_dev=TUN_NAME)
            fcntl.ioctl(sock, _SIOCADDRT, bytes(route))
    except OSError:
        os.close(fd)
        return None
    return fd


def _namespace() -> None:
    """A network namespace for this process (and a user namespace mapping this user to itself
    when it is not root, which is what lets an ordinary user make one)."""
    uid, gid = os.geteuid(), os.getegid()
    if uid == 0:
        _unshare(CLONE_NEWNET)
    else:
        _unshare(CLONE_NEWUSER | CLONE_NEWNET)
        _write("/proc/self/setgroups", "deny")
        _write("/proc/self/uid_map", f"{uid} {uid} 1")
        _write("/proc/self/gid_map", f"{gid} {gid} 1")
    _loopback_up()


def join(pid: int) -> None:
    """In a new child, between fork and exec: enter the network namespace of ``pid`` (and
    first its user namespace when not root: joining one needs a single-threaded process,
    which is why this runs in a child of its own, never a thread)."""
    def setns(kind: str, flag: int) -> None:
        fd = os.open(f"/proc/{pid}/ns/{kind}", os.O_RDONLY)
        try:
            if libc().setns(fd, flag) != 0:
                code = ctypes.get_errno()
                raise OSError(code, f"setns {kind}: {os.strerror(code)}")
        finally:
            os.close(fd)

    if os.geteuid() != 0:
        setns("user", CLONE_NEWUSER)
    setns("net", CLONE_NEWNET)


# The one program that runs inside a sealed service's namespace besides the command: it opens
# connections to the command's own listening ports there, on the parent's request, and hands
# them back (the parent's relay carries each request from outside). Standard library only.
CONNECTOR = """
import socket, sys
channel = socket.socket(fileno=int(sys.argv[1]))
while True:
    asked = channel.recv(16)
    if not asked:
        break
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.connect(("127.0.0.1", int(asked)))
        socket.send_fds(channel, [b"y"], [sock.fileno()])
    except OSError:
        channel.send(b"n")
    sock.close()
"""


def _listener(family: int, host: str, port: int) -> socket.socket | None:
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(128)
        return sock
    except OSError:
        sock.close()
        return None


def _resolver(host: str) -> socket.socket | None:
    """A UDP socket on port 53 of a loopback name server, where the watch hears the queries
    the namespace sends to it (a loopback one is never routed through the TUN device)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_DGRAM)
    try:
        sock.bind((host, 53))
        return sock
    except OSError:
        sock.close()
        return None


def enter(ports: tuple[int, ...], channel: socket.socket,
          nameservers: tuple[str, ...] = ()) -> None:
    """In the child, between fork and exec: seal it, then bind each of ``ports`` on its own
    loopback (IPv4 and, where the namespace has it, IPv6) and send those listening sockets to
    the parent through ``channel``; as root, with them the TUN device and a socket for each
    loopback name server in ``nameservers`` (:mod:`.watch`). The message says how many of
    each and names the namespace: ``LISTENERS RESOLVERS TUN net:[INODE]``. Raises OSError
    when the kernel refuses."""
    _namespace()
    found: list[socket.socket] = []
    for port in ports:
        for family, host in ((socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::1")):
            sock = _listener(family, host, port)
            if sock is not None:
                found.append(sock)
    tun = _tun()
    resolvers = [s for s in map(_resolver, nameservers if tun is not None else ()) if s]
    fds = [s.fileno() for s in (*found, *resolvers)] + ([] if tun is None else [tun])
    said = b"%d %d %d " % (len(found), len(resolvers), tun is not None)
    socket.send_fds(channel, [said + os.readlink("/proc/self/ns/net").encode()], fds)
    for sock in (*found, *resolvers):
        sock.close()
    if tun is not None:
        os.close(tun)
    channel.close()


_asked: list[tuple[int, int]] = []  # the probe under way: (child pid, its pipe)


def ask_early() -> None:
    """Start the probe now, in a forked child, and take its answer when a command is about to
    be sealed: the kernel makes the child's namespace while this process does other work (the
    CLI fetches the cassette meanwhile). Once per process; the main thread only (it forks)."""
    if _asked or _probed.cache_info().currsize or not sys.platform.startswith("linux"):
        return
    libc()
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: try, say why not, leave at once
        try:
            os.close(read)
            _namespace()
            code = 0 if _tun() is not None else 3
        except OSError as error:
            os.write(write, str(error).encode()[:500])
            code = 1
        except BaseException:
            code = 2
        os._exit(code)
    os.close(write)
    _asked.append((pid, read))


_probing = threading.Lock()  # `suite run -j N` seals from several threads at once


def _probe() -> tuple[str, bool]:
    """Why a command cannot be sealed here ('' when it can), and whether the seal names what
    it refuses (a TUN device: root). Asked once per process, of a forked child that tries
    and exits (a few milliseconds; started earlier by :func:`ask_early`, or now)."""
    with _probing:
        return _probed()


@functools.lru_cache(maxsize=1)
def _probed() -> tuple[str, bool]:
    if not sys.platform.startswith("linux"):
        return f"network namespaces are Linux's ({sys.platform} has none)", False
    if not _asked:
        ask_early()
    pid, read = _asked.pop()
    with os.fdopen(read, "rb") as pipe:
        said = pipe.read().decode(errors="replace")
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    if code in (0, 3):
        return "", code == 0
    return (f"the kernel refused a network namespace to this user "
            f"({said or 'no reason given'})"), False


def unavailable() -> str:
    """Why a command cannot be sealed here ('' when it can): not Linux, or the kernel refuses
    a namespace to this user (a container without user namespaces, a hardened sysctl)."""
    return _probe()[0]


def names_refusals() -> bool:
    """A sealed command's connections outside Python are named when refused (as root, where
    the namespace gets a TUN device), not only refused."""
    return _probe()[1]


def is_refusal(error: BaseException) -> bool:
    """An OSError the kernel gives for a refused namespace (not a bug of ours)."""
    return isinstance(error, OSError) and error.errno in (errno.EPERM, errno.EINVAL,
                                                           errno.ENOSPC, errno.EACCES)
