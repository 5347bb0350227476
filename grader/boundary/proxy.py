"""Trusted side: a hidden check runs here, on proxies of the learner objects the sandboxed child holds.

`judge_exercise` runs every check of one exercise in this (trusted) process. The learner's object
is a `Remote`: calling it, reading its attributes or iterating it sends a plain request to the
sandboxed child (grader.boundary.serve), which runs the learner's code and answers with plain data
(grader.boundary.wire). Expected values, oracles and comparisons never leave this process, so nothing the
learner's code does can change a verdict except the values it computes.

What the checks see is what they saw when they ran beside the learner's code:
- a tensor the learner returns arrives as a real `torch.Tensor` (a *mirror*); when a check
  backpropagates through it, a hook sends the gradient to the child, which continues the backward
  pass through the learner's graph and reports the gradients of the check's own input tensors;
- a parameter arrives as a `RemoteParameter`, whose in-place changes (`copy_` under no_grad) are
  written through to the learner's module, with its current `.grad`;
- a check's tensor, generator, list or dict that the learner's code changed in place is *not*
  changed here: the change is recorded (`Session.changed_in_place`, read by the checks through
  `grader.boundary.spec.changed_in_place`), so it counts against the in-place rule only and can never write
  an expected value, a shape or a dtype into the grading process; torch's global random state
  travels with every call (so `torch.manual_seed` before a call works);
- `isinstance(module, nn.Linear)` holds for a remote nn.Linear only once the trusted side has
  confirmed the claim by its behaviour (`grader.boundary.claims`); an unconfirmed claim to be a torch class
  earns nothing. An exception the learner's code raises is raised here with the same built-in type.
"""
from __future__ import annotations

import contextlib
import threading
import time
from typing import Any, Callable

import torch
import torch.nn as nn

from grader.boundary import claims, gradients
from grader.boundary.score import Result, forbidden_reason, run_each, shown
from grader.boundary.spec import Exercise, hidden_inputs, in_place_record, secret_back, secret_now
from grader.boundary.specs import exercises
from grader.boundary.standin_host import StandInHost
from grader.boundary.wire import Codec, Endpoint, Lost, WireError, raw_from

GRACE = 15  # seconds past an exercise's time limit before the trusted side gives up on its child
# One exercise's checks compute at a time in this process: they seed torch's global generator and
# draw hidden inputs from one secret, which all threads share. The turn is held only while this side
# computes: waiting on a learner's child, it is handed on and that global state kept aside, so one
# learner's child never holds up another's checks (DESIGN.md invariant 11).
LOCK = threading.Lock()
_TURN = threading.local()


@contextlib.contextmanager
def turn():
    """This thread's turn to compute checks, until the block ends (handed on while it waits: `wait`)."""
    with LOCK:
        _TURN.held = True
        try:
            yield
        finally:
            _TURN.held = False


def wait(ready: Callable[[float], bool], seconds: float) -> bool:
    """`ready(seconds)` (grader.boundary.wire.poller); a thread holding the turn hands it on meanwhile and
    takes it back, with torch's global generator and the hidden inputs' secret as it left them."""
    if not getattr(_TURN, "held", False):
        return ready(seconds)
    if ready(0):
        return True
    rng, secret = torch.get_rng_state(), secret_now()
    secret_back(0)  # no secret outside a turn: the next thread's hidden_inputs saves and restores 0, never ours
    _TURN.held = False
    LOCK.release()
    try:
        return ready(seconds)
    finally:
        LOCK.acquire()
        _TURN.held = True
        torch.set_rng_state(rng)
        secret_back(secret)


class Foreign:
    """A key into the child's table, sent back as a reference to the child's own object."""

    def __init__(self, key: int):
        self.key = key


class RemoteParameter(nn.Parameter):
    """A learner module's parameter; in-place changes are written through to the child."""

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        with torch._C.DisableTorchFunctionSubclass():
            result = func(*args, **(kwargs or {}))
        name = getattr(func, "__name__", "")
        target = args[0] if args else None
        if isinstance(target, RemoteParameter) and name.endswith("_") and not name.endswith("__") \
                or name in ("__setitem__", "__iadd__", "__isub__", "__imul__", "__itruediv__"):
            if isinstance(target, RemoteParameter):
                target.push()
        return result

    def push(self) -> None:
        session, key = self.__dict__["_remote"]
        with torch._C.DisableTorchFunctionSubclass():
            value = self.detach().clone()
        session.request("setvalue", Foreign(key), value)


class Remote:
    """A learner object in the child. Its class mirrors the torch classes it derives from."""

    __slots__ = ("_session", "_key", "_info", "__weakref__")

    def __init__(self, session: "Session", key: int, info: dict):
        object.__setattr__(self, "_session", session)
        object.__setattr__(self, "_key", key)
        object.__setattr__(self, "_info", info)

    @property
    def __class__(self):
        return self._session.mirrors.mirror_class(self._info, self)

    def __getattr__(self, name: str):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return self._session.request("getattr", self, name)

    def __setattr__(self, name: str, value) -> None:
        self._session.request("setattr", self, name, value)

    def __delattr__(self, name: str) -> None:
        self._session.request("delattr", self, name)

    def __call__(self, *args, **kwargs):
        return self._session.call(self, args, kwargs)

    def __getitem__(self, key):
        return self._session.request("getitem", self, key)

    def __setitem__(self, key, value) -> None:
        self._session.request("setitem", self, key, value)

    def __len__(self) -> int:
        return self._session.request("len", self)

    def __contains__(self, item) -> bool:
        return self._session.request("contains", self, item)

    def __bool__(self) -> bool:
        return self._session.request("bool", self)

    def __iter__(self):
        return iter(self._session.request("iter", self))

    def __repr__(self) -> str:
        return str(self._session.request("repr", self))

    def _grader_fix_dropout(self) -> None:
        self._session.request("fix_dropout", self)

    def __reduce_ex__(self, protocol):  # copy.deepcopy would copy the session's pipe, whose copy closes it
        raise TypeError("a learner object cannot be copied or pickled where the checks run")


class TrustedCodec(Codec):
    def __init__(self, session: "Session"):
        super().__init__()
        self.session = session
        self.incoming_generators: list = []

    def encode_tensor(self, t: torch.Tensor, frames: list[bytes]) -> dict:
        node = super().encode_tensor(t, frames)
        if "$t" in node:
            node["rg"] = t.requires_grad and not self.serving
        return node

    def decode_generator(self, node: dict, g: torch.Generator) -> torch.Generator:
        if self.serving:  # a callback's generator: its new state goes back with the answer
            self.incoming_generators.append((g, g.get_state(), node.get("key")))
        return g

    def encode_other(self, obj: Any) -> dict:
        if type(obj) is Remote:
            return {"$echo": obj._key}
        if type(obj) is Foreign:
            return {"$echo": obj.key}
        if self.serving and id(obj) not in self.session.handed:  # an answer: plain data only
            raise TypeError(f"the grader answers with plain data only, not a {type(obj).__name__}")
        node = {"$ref": self.keep(obj), "kind": self.session.hand_out(obj)}
        if not self.serving and node["kind"] == "function":
            interface = self.session.interfaces.setdefault(id(obj), self.session.interface(obj))
            if interface:
                node["methods"] = {name: {"$ref": self.keep(m), "kind": "function"} for name, m in interface.items()}
        return node

    def decode_ref(self, node: dict) -> Any:
        """In a call from the child, `$echo` may name only what was handed out for it (a stand-in,
        a model a check passed) or a tensor this side sent, which arrives as a copy: a request can
        never reach a check's own objects."""
        if not self.serving or "$echo" not in node:
            return super().decode_ref(node)
        found = self.table.get(node["$echo"]) if type(node["$echo"]) is int else None
        if type(found) in (torch.Tensor, nn.Parameter):
            return found.detach().clone()
        if found is None or self.session.handed.get(id(found), (None,))[0] is not found:
            raise TypeError("a reference to an object the grader did not hand out")
        return found

    def decode_tensor(self, node: dict, tensor: torch.Tensor, frames: list[bytes]) -> Any:
        if self.serving:
            return tensor  # a callback's argument: a plain value
        key, wants_grad = node.get("key"), bool(node.get("rg")) and tensor.is_floating_point()
        if node.get("param"):
            mirror = RemoteParameter(tensor, requires_grad=wants_grad)
            mirror.__dict__["_remote"] = (self.session, key)
            grad = node.get("grad")
            if isinstance(grad, dict) and "$t" in grad:
                mirror.grad = raw_from(grad, frames)
        else:
            mirror = tensor.requires_grad_(wants_grad)
        if wants_grad:
            mirror.register_hook(lambda grad, _key=key: self.session.push_grad(_key, grad))
        self.remember(mirror, key)
        return mirror

    def wrap(self, node: dict) -> Any:
        return self.session.proxy(node)


class Session(StandInHost):
    """One exercise's conversation with the child, which ends at `deadline` (time.monotonic(); by
    default `timeout + grace` from now), whatever the child does to its own clock: past it, every
    request raises Overtime at once, so a check that catches the error and asks again waits no longer."""

    def __init__(self, conn, timeout: float, grace: float = GRACE, deadline: float | None = None):
        self.codec = TrustedCodec(self)
        self.ends = time.monotonic() + timeout + grace if deadline is None else deadline
        self.endpoint = Endpoint(conn, self.codec, self.handle, lambda: max(0.0, self.ends - time.monotonic()))
        ready = self.endpoint.wait
        self.endpoint.wait = lambda seconds: wait(ready, seconds)
        self.lost: Lost | None = None
        self.proxies: dict[int, Remote] = {}
        self.tokens: dict[int, tuple[list, Any, list]] = {}
        self.handed: dict[int, tuple[Any, str]] = {}
        self.interfaces: dict[int, dict[str, Any]] = {}  # a handed-over module's id -> its methods
        self.changed: dict[int, tuple[Any, Any]] = {}  # id -> (a check's object, what the child made of it)
        self.mirrors = claims.Mirrors()

    def request(self, op: str, *args):
        if self.lost is not None:  # the conversation is broken: never half-way through another message
            raise Lost(str(self.lost))
        try:
            return self.endpoint.request(op, *args)
        except (Lost, WireError) as err:
            self.lost = Lost(str(err))
            raise

    def call(self, target, args: tuple, kwargs: dict):
        reply = self.request("call", target, list(args), dict(kwargs), torch.is_grad_enabled(), torch.get_rng_state())
        torch.set_rng_state(reply["rng"])
        now = self.apply_changes(reply["changed"])
        for where, value in reply["edited"]:  # a list or dict argument the learner's code edited in place
            local = args[where] if type(where) is int and 0 <= where < len(args) else kwargs.get(where)
            if type(local) in (list, dict) and type(value) is type(local):
                self.changed[id(local)] = (local, value)
                now[id(local)] = value
        return _as_returned(reply["value"], now)

    def apply_changes(self, changed: list) -> dict[int, Any]:
        """Record which of the check's tensors and generators the learner's code changed in place,
        and to what; never write it into them (issue 29: an input zeroed in place would otherwise
        write the expected value of a check that computes it afterwards). id -> new value."""
        now: dict[int, Any] = {}
        for key, value in changed:
            local = self.codec.table.get(key)
            if isinstance(local, (torch.Tensor, torch.Generator)):
                self.changed[id(local)] = (local, value)
                now[id(local)] = value
        return now

    def changed_in_place(self, value: Any) -> bool:
        entry = self.changed.get(id(value))
        return entry is not None and entry[0] is value

    def is_child_object(self, value: Any) -> bool:
        return type(value) is Remote

    def push_grad(self, key: int, grad: torch.Tensor) -> None:
        """A check's backward pass reached a mirror: continue it in the child, then bring back the
        gradients of the check's own tensors that the learner's graph used."""
        deltas = self.request("backward", Foreign(key), grad.detach())
        for local_key, delta in deltas.items():
            local = self.codec.table.get(local_key)
            if isinstance(local, torch.Tensor) and local.requires_grad:
                if type(delta) is not torch.Tensor or delta.shape != local.shape or delta.dtype != local.dtype:
                    raise WireError("a gradient that does not fit the tensor it is for")
                if local.is_leaf:
                    local.grad = delta if local.grad is None else local.grad + delta
                else:
                    gradients.backward([local], [delta])

    def proxy(self, node: dict) -> Remote:
        key = node.get("$ref")
        if key not in self.proxies:
            self.proxies[key] = Remote(self, key,
                                       {"mro": node.get("mro") or [], "name": str(node.get("name", "object"))})
        return self.proxies[key]


def _as_returned(value: Any, now: dict[int, Any], depth: int = 0) -> Any:
    """The learner's answer, where it hands back one of the check's own objects (`return x` after
    `x.mul_(2)`), holds what the child made of it: the check's object itself stays as it was."""
    if id(value) in now and isinstance(value, (torch.Tensor, list, dict)):
        return now[id(value)]
    if type(value) in (list, tuple) and depth < 8:
        return type(value)(_as_returned(v, now, depth + 1) for v in value)
    if type(value) is dict and depth < 8:
        return {k: _as_returned(v, now, depth + 1) for k, v in value.items()}
    return value


def checks_of(chapter_name: str) -> dict[str, Exercise]:
    """The chapter's exercises (grader.boundary.specs), whose checks `judge_exercise` runs."""
    return exercises(chapter_name)


def judge_exercise(exercise: Exercise, conn, timeout: float, secret: int = 0, deadline: float | None = None) -> dict:
    """Every check of `exercise`, run here against the child's object, by `deadline` (time.monotonic());
    the verdict as plain data. Overtime (a Lost) when the child has not answered by then."""
    result = evaluate(exercise, conn, timeout, secret, deadline)
    return {"passed": result.passed, "failed": [list(f) for f in result.failed], "zero_reason": result.zero_reason}


def evaluate(exercise: Exercise, conn, timeout: float, secret: int = 0, deadline: float | None = None):
    """Every check of `exercise`, run in this process against the object the child at `conn` holds;
    its hidden inputs drawn from `secret` (grader.boundary.spec.hidden_inputs), which stays here."""
    result = Result(exercise.name, exercise.points)
    with turn(), torch.random.fork_rng(devices=[]), hidden_inputs(secret):
        session = Session(conn, timeout, deadline=deadline)
        stand_ins = dict(exercise.stand_ins)
        obj = session.request("begin", exercise.name, stand_ins, list(exercise.forbidden), float(timeout))
        if obj is None:
            result.zero_reason = shown(f"`{exercise.name}` is not defined")
        else:
            with in_place_record(session.changed_in_place):
                run_each(exercise, obj, result, passthrough=(Lost, WireError))
        calls = session.request("end")
        if calls and not result.zero_reason:
            result.zero_reason = forbidden_reason(calls)
    return result
