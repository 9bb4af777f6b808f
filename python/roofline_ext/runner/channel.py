"""Messages between the runner and its worker processes, over Unix sockets.

Two kinds of socket, for two kinds of traffic:

* the *control* socket between the runner and the fork server is ``SOCK_SEQPACKET``: one message
  is one datagram, so a socket handed over with it (``SCM_RIGHTS``) can never attach to the wrong
  message. Both ends run only our code, so messages are pickled.
* a *channel* between the runner and one worker is ``SOCK_STREAM`` with length-prefixed frames
  (results can be large). Jobs go out pickled (the runner wrote them); replies come back as JSON,
  so that nothing a task leaves in a reply can make the runner import a module or run code.

What a worker uses to send its reply is bound when this module is imported (in the fork server,
before any task): a task that replaces ``json.dumps``, ``json.JSONEncoder`` or
``socket.socket.sendall`` cannot change the reply of its own job, and the worker's fingerprint
(:mod:`.fingerprint`) sees the change, so no later job runs in that worker.
"""
from __future__ import annotations

import _socket
import array
import json
import pickle
import socket
import struct
from typing import Any, Callable

_LEN = struct.Struct("!Q")
_pack_len = _LEN.pack
# The C methods themselves: socket.socket is a Python class a task could add methods to.
_sendall, _recv = _socket.socket.sendall, _socket.socket.recv
CONTROL_MAX = 1 << 16  # control messages are small (a request, a pid, an exit status)
#: The runner's ``sys.path`` (JSON) in the fork server's environment, so that its workers import what
#: the runner would; here, with the protocol both ends share, so that starting a server does not
#: import the server's own module (and the worker code it loads) into the runner.
SYS_PATH_ENV = "ROOFLINE_EXT_RUNNER_SYS_PATH"


# --- control socket (runner <-> fork server) ------------------------------------------------------

def send_control(sock: socket.socket, message: dict[str, Any], fds: list[int] | None = None,
                 flags: int = 0) -> None:
    """One message (with ``fds``). ``flags=socket.MSG_DONTWAIT``: raise ``BlockingIOError`` rather
    than wait for room (the runner never waits on the server: the server may be waiting on it)."""
    data = pickle.dumps(message)
    if fds:
        sock.sendmsg([data], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))], flags)
    else:
        sock.send(data, flags)


def recv_control(sock: socket.socket) -> tuple[dict[str, Any] | None, list[int]]:
    """One control message and the descriptors that came with it; ``(None, [])`` at end of file."""
    data, fds, _flags, _addr = socket.recv_fds(sock, CONTROL_MAX, 8)
    if not data:
        for fd in fds:
            _close_quietly(fd)
        return None, []
    return pickle.loads(data), list(fds)


def _close_quietly(fd: int) -> None:
    import os

    try:
        os.close(fd)
    except OSError:
        pass


# --- channel (runner <-> one worker) --------------------------------------------------------------

def send_frame(sock: socket.socket, payload: bytes) -> None:
    _sendall(sock, _pack_len(len(payload)) + payload)


def recv_frame(sock: socket.socket) -> bytes | None:
    """One whole frame (blocking); None when the other end closed the socket."""
    head = _recv_exactly(sock, _LEN.size)
    if head is None:
        return None
    body = _recv_exactly(sock, _LEN.unpack(head)[0])
    if body is None:
        return None
    return body


def _recv_exactly(sock: socket.socket, n: int) -> bytes | None:
    buf = bytearray()
    while len(buf) < n:
        chunk = _recv(sock, min(n - len(buf), 1 << 20))
        if not chunk:
            return None
        buf += chunk
    return bytes(buf)


class FrameReader:
    """Frames out of the bytes a non-blocking socket hands over, in whatever pieces they come."""

    def __init__(self) -> None:
        self._buf = bytearray()

    def feed(self, data: bytes) -> list[bytes]:
        self._buf += data
        frames = []
        while len(self._buf) >= _LEN.size:
            (n,) = _LEN.unpack_from(self._buf)
            if len(self._buf) < _LEN.size + n:
                break
            frames.append(bytes(self._buf[_LEN.size:_LEN.size + n]))
            del self._buf[:_LEN.size + n]
        return frames


def encode_job(job: dict[str, Any]) -> bytes:
    return pickle.dumps(job)


def decode_job(frame: bytes) -> dict[str, Any]:
    return pickle.loads(frame)


def _bind_reply_encoder() -> Callable[[dict[str, Any]], bytes]:
    """``json.dumps(reply, default=str).encode()``, made of the objects json has now.

    json.dumps calls its C encoder through module globals and class attributes a task can
    replace; this calls the same C encoder directly, with the same settings, so its output is
    json.dumps's. default=str: a value json cannot write (a dtype, a Path) arrives as its text, as
    the results writers would write it anyway.
    """
    from json import encoder

    make = getattr(encoder, "c_make_encoder", None)  # None without the C accelerator
    escape = getattr(encoder, "c_encode_basestring_ascii", None)
    text, join, to_bytes = str, "".join, str.encode
    if make is None or escape is None:  # a Python built without the accelerator: the class, bound now
        encode = json.JSONEncoder(default=text).encode
        return lambda reply: to_bytes(encode(reply))

    def encode_reply(reply: dict[str, Any]) -> bytes:
        # markers, default, escape, indent, key and item separators, sort_keys, skipkeys, allow_nan
        return to_bytes(join(make({}, text, escape, None, ": ", ", ", False, False, True)(reply, 0)))

    return encode_reply


encode_reply = _bind_reply_encoder()


def decode_reply(frame: bytes) -> dict[str, Any]:
    return json.loads(frame)
