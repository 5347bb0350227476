"""Issue 29, sections 1, 2, 4 (third bullet) and 7 (second bullet): attacks on the trust boundary
itself, each made from inside the learner's softmax while the hidden checks call it.

An *in-call probe* defines softmax as: try the attack on the arguments the check passed; answer
correctly only if the attack worked, else raise. So it scores 8 where the attack succeeds and 6
(the other two exercises, graded with a correct softmax standing in) where it is refused.
"""
from __future__ import annotations

import textwrap
from typing import Callable

import nbformat

from tests.adversarial.cases import ANSWERS, Case, Paths, notebook

REFERENCE_SOFTMAX = ANSWERS["softmax"].replace("def softmax(", "def _reference_softmax(")
# The child's end of the conversation with the grader, found the way learner code could find it.
FIND_ENDPOINT = """
import gc
gc.unfreeze()  # the fork server froze its heap (grader.boundary.heap): gc.get_objects skips it until thawed
def _endpoint(x):
    return next(o for o in gc.get_objects() if type(o).__name__ == 'Endpoint' and id(x) in o.codec.foreign)
"""


def in_call_probe(attack: str) -> Callable[[Paths], nbformat.NotebookNode]:
    """softmax(x, dim) runs `attack` (which sees x, dim and ep, the child's endpoint) first."""
    def build(paths: Paths) -> nbformat.NotebookNode:
        body = textwrap.indent(textwrap.dedent(attack).format(course=paths.course).strip(), "        ")
        source = (REFERENCE_SOFTMAX + FIND_ENDPOINT
                  + "\n\ndef softmax(x, dim=-1):\n    try:\n        ep = _endpoint(x)\n"
                  + body + "\n    except BaseException:\n        raise NotImplementedError('the attack was refused')\n"
                  "    return _reference_softmax(x, dim)\n")
        return notebook({"softmax": source})
    return build


def in_place(body: str) -> Callable[[Paths], nbformat.NotebookNode]:
    """softmax(x, dim) changes x in place, then answers for what x has become."""
    source = REFERENCE_SOFTMAX + "\n\ndef softmax(x, dim=-1):\n" + textwrap.indent(textwrap.dedent(body).strip(),
                                                                                   "    ") \
        + "\n    return _reference_softmax(x, dim)\n"
    return lambda paths: notebook({"softmax": source})


# A class that claims to be torch.nn.Linear (its module and name say so) and computes nothing.
FAKE_LINEAR = """
class Linear:
    __module__ = 'torch.nn.modules.linear'

    def __init__(self, in_features, out_features, bias=True):
        self.in_features, self.out_features = in_features, out_features
        self.bias = object() if bias else None

    def __call__(self, x):
        return x


class SelfAttention(nn.Module):
    def __init__(self, d_model, d_k, d_v, bias=False):
        super().__init__()
        self.W_q, self.W_k = Linear(d_model, d_k, bias), Linear(d_model, d_k, bias)
        self.W_v = Linear(d_model, d_v, bias)

    def forward(self, x, mask=None):
        return x, x
"""

# A reply forged on the pipe that names one frame 24 times (16 MB each: 384 MB decoded before).
FORGED_REPLY = """
import json
blob = bytes(16 * 1024 * 1024)
node = {{"$t": 0, "dtype": "uint8", "shape": [len(blob)]}}
ep.conn.send_bytes(json.dumps({{"kind": "reply", "value": [node] * 24, "frames": 1}}).encode())
ep.conn.send_bytes(blob)
"""

CASES = [
    # 1. the trusted process runs what the child asks for: each refused, so 6 (8 on b1d8d3b where it ran)
    Case("callback-chain-numpy-tofile", in_call_probe("""
        to_numpy = ep.request('cb_getattr', x, 'numpy')
        to_numpy().tofile('{course}/planted-by-a-learner.txt')"""), 6.0),
    Case("callback-tolist-of-a-check-tensor", in_call_probe("""
        assert type(ep.request('cb_getattr', x, 'tolist')()) is list"""), 6.0),
    Case("callback-echo-every-key", in_call_probe("""
        stub = next(o for o in gc.get_objects() if isinstance(o, type) and o.__name__ == 'TrustedStub')
        def first_won():
            for op in ('cb_getattr', 'cb_attribute'):  # the old operation, then the new one
                for key in range(1, 64):
                    for name in ('numpy', 'tolist', 'item', 'storage', 'untyped_storage', 'eval'):
                        try:
                            return ep.request(op, stub(ep, key, 'function'), name)
                        except Exception:
                            pass
            raise LookupError('every key refused')
        first_won()"""), 6.0),
    Case("callback-private-names-and-calling-a-tensor", in_call_probe("""
        def first_won():
            for op, args in (('cb_getattr', (x, '__class__')), ('cb_getattr', (x, '_version')),
                             ('cb_call', (x, [], {{}}, [], [], False, torch.get_rng_state())),
                             ('cb_attribute', (x, 'data')), ('cb_attribute', (x, '__dict__')),
                             ('cb_mode', (x, False)), ('handle', ('cb_call', [])), ('_run', ())):
                try:
                    return ep.request(op, *args)
                except Exception:
                    pass
            raise LookupError('every request refused')
        first_won()"""), 6.0),
    Case("callback-new-on-torch-classes", in_call_probe("""
        won = []
        for cls in (torch.nn.Linear, x):
            try:
                ep.request('cb_new', cls, [2, 2], {{}})
                won.append(cls)
            except Exception:
                pass
        assert won"""), 6.0),
    # 2. in-place changes never write a check's expected values
    Case("zero-input-in-place", in_place("x.zero_()"), 6.0),
    Case("swap-input-data-for-another-shape", in_place("x.data = torch.zeros(1, dtype=torch.float64)"), 6.0),
    # softmax is the same for x and x - max: only the in-place check is lost (1 of softmax's 6)
    Case("in-place-but-correct-answer", in_place("x.sub_(x.amax(dim=dim, keepdim=True))"), 6.0 + round(2 * 5 / 6, 3)),
    # 4. the wire bounds what a message decodes into: a forged reply stops only this submission
    Case("forged-reply-one-frame-24-times", in_call_probe(FORGED_REPLY), 0.0, reason="broke the grading protocol"),
    # 7. a class claiming to be torch.nn.Linear is confirmed by behaviour, not by name
    Case("fake-nn-linear-claim", lambda paths: notebook({"SelfAttention": FAKE_LINEAR}), 5.0),
]
