"""Both sides: plain data across the trust boundary, the codec and the two-way RPC both sides speak.

A message is one JSON header (`Connection.send_bytes`) followed by the raw bytes of each tensor it
carries, one frame each: little-endian values in row-major order, with dtype and shape in the
header (the layout safetensors uses). Nothing is pickled, nothing on the wire is code.

Values: None, bool, int, float, str and lists are JSON; every other value is a one-key object:
`$tuple`, `$dict` (any plain keys, insertion order kept), `$odict`, `$set`, `$bytes`, `$size`,
`$dtype`, `$device`, `$slice`, `$ellipsis`, `$t` (a tensor), `$gen` (a torch.Generator's state).
Anything else travels as a reference into the sender's table (`$ref`), which the receiver wraps
(`Endpoint.wrap`) or, when it comes back, resolves to the object itself.

`Endpoint` is symmetric: `request` sends one call and, while it waits for the answer, serves the
calls the other side makes meanwhile (a stand-in the learner's code calls back into, a learner
model a stand-in calls), so calls nest to any depth in strict stack order.
"""
from __future__ import annotations

import base64
import builtins
import collections
import contextlib
import json
import math
import select
import traceback
from typing import Any, Callable

import torch
from torch.testing import _comparison

# torch.testing.assert_close imports torch.distributed.tensor on its first call (1-2 s of sympy and torch.fx,
# in the grading process and again in the fork server) only to unwrap DTensors. None crosses the boundary
# (the codec builds plain tensors, the checks take `type(x) is torch.Tensor`) and neither side makes one,
# so both sides (this module is imported by each) tell assert_close there are none.
_comparison._HAS_DTENSOR = False

MAX_HEADER = 16 * 1024 * 1024  # bytes of one JSON header
MAX_FRAMES = 4096  # tensors in one message
MAX_TENSOR_BYTES = 512 * 1024 * 1024  # bytes of one message's tensors, together
# What one message may decode into (tensors, `$bytes`, `$gen`, strings, containers): a bound on
# what the receiver builds, not only on what it reads; with each frame decoded at most once, a
# message cannot make one frame into many tensors (issue 29: 24 references to one 64 MB frame).
MAX_DECODED_BYTES = MAX_TENSOR_BYTES + 64 * 1024 * 1024
NODE_BYTES = 64  # what one decoded container or scalar is counted as


class WireError(Exception):
    """The other side sent something that is not a well-formed message."""


class Lost(Exception):
    """The other side stopped answering (closed the pipe or ran past the deadline)."""


class Overtime(Lost):
    """The other side had not answered by the deadline of what it was asked (grader.boundary.proxy)."""


DTYPES = {str(d).removeprefix("torch."): d for d in (
    torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64, torch.int32, torch.int16,
    torch.int8, torch.uint8, torch.bool, torch.complex64, torch.complex128)}
ITEM_BYTES = {name: dtype.itemsize for name, dtype in DTYPES.items()}


def tensor_bytes(t: torch.Tensor) -> bytes:
    flat = t.detach().cpu().contiguous().reshape(-1)
    return flat.view(torch.uint8).numpy().tobytes() if flat.numel() else b""


def tensor_from(blob: bytes, dtype: str, shape: list[int]) -> torch.Tensor:
    if dtype not in DTYPES or not isinstance(shape, list) or not all(isinstance(n, int) and n >= 0 for n in shape):
        raise WireError(f"bad tensor header: {dtype} {shape}")
    kind = DTYPES[dtype]
    numel = 1
    for n in shape:
        numel *= n
    if len(blob) != numel * ITEM_BYTES[dtype]:
        raise WireError("tensor bytes do not match its shape")
    if not numel:
        return torch.empty(shape, dtype=kind)
    return torch.frombuffer(bytearray(blob), dtype=torch.uint8).view(kind).reshape(shape).clone()


class Codec:
    """Turns values into (header, frames) and back. `table` maps key -> each object this side has
    handed out (`keep`); `foreign` remembers what stands here for the other side's objects, which
    go back as `$echo`; the hooks let each side choose how tensors and references look."""

    def __init__(self):
        self.table: dict[int, Any] = {}
        self._keys: dict[int, int] = {}
        self._next = 1
        self.serving = False  # decoding a call from the other side, or encoding its answer
        self.foreign: dict[int, tuple[Any, int]] = {}  # id(obj) -> (obj, the other side's key for it)

    def keep(self, obj: Any) -> int:
        key = self._keys.get(id(obj))
        if key is None or self.table.get(key) is not obj:
            key, self._next = self._next, self._next + 1
            self.table[key], self._keys[id(obj)] = obj, key
        return key

    def forget(self) -> None:
        self.table.clear()
        self._keys.clear()
        self.foreign.clear()

    def remember(self, obj: Any, key: int) -> None:
        """`obj` stands for the other side's object `key`: it goes back as a reference to that."""
        self.foreign[id(obj)] = (obj, key)

    # -- hooks, overridden per side
    def encode_tensor(self, t: torch.Tensor, frames: list[bytes]) -> dict:
        hit = self.foreign.get(id(t))
        if hit is not None and hit[0] is t:
            return {"$echo": hit[1]}
        return {**self.raw_tensor(t, frames), "key": self.keep(t)}

    def raw_tensor(self, t: torch.Tensor, frames: list[bytes]) -> dict:
        frames.append(tensor_bytes(t))
        return {"$t": len(frames) - 1, "dtype": str(t.dtype).removeprefix("torch."), "shape": list(t.shape)}

    def encode_other(self, obj: Any) -> dict:
        return {"$ref": self.keep(obj)}

    def decode_tensor(self, node: dict, tensor: torch.Tensor, frames: list[bytes]) -> Any:
        return tensor

    def decode_ref(self, node: dict) -> Any:
        """`$echo`: one of this side's own objects, coming back; `$ref`: the other side's (`wrap`)."""
        if "$echo" in node:
            key = node["$echo"]
            if key not in self.table:
                raise WireError("a reference to an object this side no longer has")
            return self.table[key]
        return self.wrap(node)

    def wrap(self, node: dict) -> Any:
        raise WireError("references are not accepted here")

    # -- the codec
    def encode(self, value: Any, frames: list[bytes], depth: int = 0) -> Any:
        if depth > 100:
            raise ValueError("the value is nested too deeply to send")
        kind = type(value)
        if value is None or kind in (bool, int, float, str):
            return value
        if kind is list:
            return [self.encode(v, frames, depth + 1) for v in value]
        if kind is tuple:
            return {"$tuple": [self.encode(v, frames, depth + 1) for v in value]}
        if kind in (dict, collections.OrderedDict):
            tag = "$dict" if kind is dict else "$odict"
            return {tag: [[self.encode(k, frames, depth + 1), self.encode(v, frames, depth + 1)] for k,
                          v in value.items()]}
        if kind in (set, frozenset):
            return {"$set": [self.encode(v, frames, depth + 1) for v in value], "frozen": kind is frozenset}
        if kind is bytes:
            return {"$bytes": base64.b64encode(value).decode()}
        if kind is torch.Size:
            return {"$size": list(value)}
        if kind is torch.dtype:
            return {"$dtype": str(value).removeprefix("torch.")}
        if kind is torch.device:
            return {"$device": str(value)}
        if kind is slice:
            return {"$slice": [self.encode(v, frames, depth + 1) for v in (value.start, value.stop, value.step)]}
        if value is Ellipsis:
            return {"$ellipsis": True}
        if kind in (torch.Tensor, torch.nn.Parameter):
            return self.encode_tensor(value, frames)
        if kind is torch.Generator:
            frames.append(tensor_bytes(value.get_state()))
            return {"$gen": len(frames) - 1, **self.generator_key(value)}
        return self.encode_other(value)

    def generator_key(self, g: torch.Generator) -> dict:
        return {"key": self.keep(g)}

    def decode(self, node: Any, frames: list[bytes], depth: int = 0) -> Any:
        if type(frames) is not Frames:  # one message: its frames, and what decoding it may build
            frames = Frames(frames)
        if depth > 100:
            raise WireError("nested too deeply")
        frames.spend(len(node) if type(node) is str else NODE_BYTES)
        if node is None or type(node) in (bool, int, float, str):
            return node
        if type(node) is list:
            frames.spend(8 * len(node))
            return [self.decode(v, frames, depth + 1) for v in node]
        if type(node) is not dict or not node:
            raise WireError(f"unexpected {type(node).__name__} in a message")
        tag = next(iter(node))
        body = node[tag]
        sub = lambda v: self.decode(v, frames, depth + 1)  # noqa: E731
        if tag == "$tuple":
            return tuple(sub(v) for v in body)
        if tag in ("$dict", "$odict"):
            pairs = [(sub(k), sub(v)) for k, v in body]
            return dict(pairs) if tag == "$dict" else collections.OrderedDict(pairs)
        if tag == "$set":
            items = [sub(v) for v in body]
            return frozenset(items) if node.get("frozen") else set(items)
        if tag == "$bytes":
            if type(body) is not str:
                raise WireError("bytes that are not base64 text")
            frames.spend(len(body))
            return base64.b64decode(body)
        if tag == "$size":
            return torch.Size([int(n) for n in body])
        if tag == "$dtype":
            if body not in DTYPES:
                raise WireError(f"unknown dtype {body}")
            return DTYPES[body]
        if tag == "$device":
            return torch.device(str(body))
        if tag == "$slice":
            return slice(*(sub(v) for v in body))
        if tag == "$ellipsis":
            return Ellipsis
        if tag == "$t":
            return self.decode_tensor(node, raw_from(node, frames), frames)
        if tag == "$gen":
            g, blob = torch.Generator(), _frame(frames, body)
            g.set_state(tensor_from(blob, "uint8", [len(blob)]))
            return self.decode_generator(node, g)
        if tag in ("$ref", "$echo"):
            found = self.decode_ref(node)
            if isinstance(found, torch.Tensor):  # an echoed tensor may arrive as a copy: count it
                frames.spend(found.nelement() * found.element_size())
            return found
        raise WireError(f"unknown tag {tag}")

    def decode_generator(self, node: dict, g: torch.Generator) -> torch.Generator:
        return g


def raw_from(node: dict, frames: list[bytes]) -> torch.Tensor:
    """The tensor a `$t` node describes (`Codec.raw_tensor`), with no side's bookkeeping."""
    return tensor_from(_frame(frames, node.get("$t")), node.get("dtype"), node.get("shape"))


class Frames(list):
    """One message's frames while it is decoded: each may be decoded once, and everything decoded
    is counted against MAX_DECODED_BYTES."""

    def __init__(self, blobs):
        super().__init__(blobs)
        self.used: set[int] = set()
        self.spent = 0

    def spend(self, n: int) -> None:
        self.spent += n
        if self.spent > MAX_DECODED_BYTES:
            raise WireError(f"a message that decodes into more than {MAX_DECODED_BYTES} bytes")


def _frame(frames: list[bytes], index: Any) -> bytes:
    if type(index) is not int or not 0 <= index < len(frames):
        raise WireError("a tensor points at a frame that is not there")
    if type(frames) is Frames:
        if index in frames.used:
            raise WireError("a message refers to one frame twice")
        frames.used.add(index)
        frames.spend(len(frames[index]))
    return frames[index]


def poller(conn) -> Callable[[float], bool]:
    """`conn.poll(seconds)` without the selector multiprocessing builds for each call (two calls or more a
    message): one poll object for the connection. True once a message is there or the other side has closed
    (reading then raises), as `conn.poll` says: a Connection reads its pipe directly, holding nothing back."""
    watch = select.poll()
    watch.register(conn.fileno(), select.POLLIN)
    return lambda seconds: bool(watch.poll(max(0, math.ceil(seconds * 1000))))


class Endpoint:
    """One side of the conversation. `handle(op, args)` serves the other side's calls; `request`
    makes one and returns its answer (or raises what the other side raised, rebuilt by `rebuild`)."""

    def __init__(self, conn, codec: Codec, handle: Callable[[str, list], Any], deadline: Callable[[], float | None]):
        self.conn, self.codec, self.handle, self.deadline = conn, codec, handle, deadline
        self.wait: Callable[[float], bool] = poller(conn)  # or one that lets other threads on meanwhile
        self.depth = 0
        self.in_wire = 0  # > 0 while this side reads, writes or translates a message
        self.after_reply: Callable[[], None] | None = None  # runs as an answer is handed back
        # around translating a message (its tensors): the child's grader.boundary.forbid.unrecorded
        self.translating: Callable[[], Any] = contextlib.nullcontext

    def send(self, header: dict, frames: list[bytes]) -> None:
        self.in_wire += 1
        try:
            self._send(header, frames)
        finally:
            self.in_wire -= 1

    def receive(self) -> tuple[dict, list[bytes]]:
        self.in_wire += 1
        try:
            return self._receive()
        finally:
            self.in_wire -= 1

    def _send(self, header: dict, frames: list[bytes]) -> None:
        header["frames"] = len(frames)
        self.conn.send_bytes(json.dumps(header).encode())
        for blob in frames:
            self.conn.send_bytes(blob)

    def _receive(self) -> tuple[dict, list[bytes]]:
        timeout = self.deadline()
        if timeout is not None and not self.wait(timeout):
            raise Overtime("no answer in time")
        try:
            header = json.loads(self.conn.recv_bytes(MAX_HEADER))
            if type(header) is not dict or type(header.get("frames")) is not int \
                    or not 0 <= header["frames"] <= MAX_FRAMES:
                raise WireError("a message without a valid header")
            frames, total = [], 0
            for _ in range(header["frames"]):
                if timeout is not None and not self.wait(timeout):
                    raise Overtime("a message stopped half-way")
                blob = self.conn.recv_bytes(MAX_TENSOR_BYTES)
                total += len(blob)
                if total > MAX_TENSOR_BYTES:
                    raise WireError("a message carries too many bytes")
                frames.append(blob)
        except (EOFError, ConnectionError) as err:
            raise Lost(f"the other side closed the connection ({type(err).__name__})") from None
        except OSError as err:
            raise WireError(f"an oversized message ({err})") from None
        except ValueError as err:
            raise WireError(f"an unreadable message ({err})") from None
        return header, frames

    def request(self, op: str, *args: Any) -> Any:
        self.in_wire += 1
        self.depth += 1
        try:
            frames: list[bytes] = []
            with self.translating():
                header = {"kind": "call", "op": op, "args": self.codec.encode(list(args), frames)}
            self._send(header, frames)
            while True:
                header, frames = self._receive()
                kind = header.get("kind")
                if kind == "call":
                    self.in_wire -= 1  # the other side's call runs this side's code meanwhile
                    try:
                        self.serve_one(header, frames)
                    finally:
                        self.in_wire += 1
                    continue
                if kind == "reply":
                    with self.translating():
                        value = self.codec.decode(header.get("value"), frames)
                elif kind == "error":
                    value = rebuild(header.get("error") or {})
                else:
                    raise WireError(f"unexpected message kind {kind!r}")
                break
        finally:
            self.in_wire -= 1
            self.depth -= 1
        if self.after_reply is not None:
            self.after_reply()
        if kind == "error":
            raise value
        return value

    def serve_one(self, header: dict, frames: list[bytes]) -> None:
        try:
            self.codec.serving, self.in_wire = True, self.in_wire + 1
            try:
                with self.translating():
                    args = self.codec.decode(header.get("args"), frames)
            finally:
                self.codec.serving, self.in_wire = False, self.in_wire - 1
            if type(args) is not list or type(header.get("op")) is not str:
                raise WireError("a call without an operation")
            value = self.handle(header["op"], args)
            out: list[bytes] = []
            self.codec.serving, self.in_wire = True, self.in_wire + 1
            try:
                with self.translating():
                    reply = {"kind": "reply", "value": self.codec.encode(value, out)}
            finally:
                self.codec.serving, self.in_wire = False, self.in_wire - 1
        except (Lost, WireError):
            raise
        except BaseException as err:  # noqa: BLE001 - the caller gets it as an error message
            out, reply = [], {"kind": "error", "error": describe(err)}
        self.send(reply, out)


def describe(err: BaseException) -> dict:
    """An exception as plain data: its type's name, the built-in exceptions it derives from, its
    message and the line it was raised on."""
    frames = traceback.extract_tb(err.__traceback__)
    try:
        message = str(err)[:2000]
    except Exception:  # noqa: BLE001 - a message that cannot be shown
        message = "(no message)"
    mro = [c.__name__ for c in type(err).__mro__ if getattr(builtins, c.__name__, None) is c]
    return {"type": type(err).__name__[:100], "message": message, "mro": mro, "line": frames[-1].lineno if frames
            else None}


_REBUILT: dict[tuple[str, type], type] = {}


def rebuild(error: dict) -> Exception:
    """The other side's exception on this side: the same built-in type (a subclass named as the
    original where it was the learner's own), never a class the other side defined."""
    name = str(error.get("type") or "Exception")
    base: type = Exception
    for candidate in error.get("mro") or []:
        cls = getattr(builtins, str(candidate), None)
        if isinstance(cls, type) and issubclass(cls, Exception):
            base = cls
            break
    cls = base
    if name != base.__name__:
        cls = _REBUILT.setdefault((name, base), type(name, (base,), {"__module__": "learner"}))
    try:
        err = cls(str(error.get("message", "")))
    except Exception:  # noqa: BLE001 - a built-in that wants other arguments
        err = Exception(f"{name}: {error.get('message', '')}")
    err.remote_line = error.get("line") if type(error.get("line")) is int else None
    return err
