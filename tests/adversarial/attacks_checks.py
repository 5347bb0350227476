"""Issue 29, sections 6 and 7: answers that replay recorded inputs, reach a forbidden routine by
another road, or do nothing and collect the side rules. Each scores what it computes: nothing for
softmax (2 points) or scaled_dot_product_attention (3 points) out of 8.

The replay table is what a learner gets by recording, during one grading, what softmax is called
with and printing it in a later cell (the feedback carries it out): built here by running the
hidden checks on a recorder, with the seeds as written (what every grading drew before issue 29).
"""
from __future__ import annotations

import json

import torch.nn.functional as F

from tests.adversarial.cases import Case, cells

WITHOUT_SOFTMAX = 6.0  # scaled_dot_product_attention 3 + SelfAttention 3 (stand-ins replace the softmax)


def recorded_softmax_table() -> str:
    """JSON: [[x values, dim, dtype, shape], softmax] for every call the softmax checks make."""
    from grader.boundary.specs import exercises

    table = []

    def recorder(x, dim=-1):
        out = F.softmax(x, dim=dim)
        table.append([[x.flatten().tolist(), dim, str(x.dtype)], out.flatten().tolist()])
        return out

    for check in exercises("self_attention")["softmax"].checks:
        try:
            check.run(recorder)
        except AssertionError:
            pass
    return json.dumps(table)


def lookup_table_softmax(paths) -> object:
    source = f"""
import json
import torch

_TABLE = {{json.dumps(key): out for key, out in json.loads({recorded_softmax_table()!r})}}


def softmax(x, dim=-1):
    \"\"\"Computes nothing: answers from what an earlier grading asked.\"\"\"
    key = json.dumps([x.flatten().tolist(), dim, str(x.dtype)])
    if key not in _TABLE:
        return x.clone()
    return torch.tensor(_TABLE[key], dtype=x.dtype).view(x.shape)
"""
    return cells(answers={"softmax": source})(paths)


def forbidden_softmax(body: str) -> str:
    return f"import torch\n\n\ndef softmax(x, dim=-1):\n    return {body}\n"


RAISES = "def scaled_dot_product_attention(q, k, v, mask=None):\n    raise ValueError('not written yet')\n"
# a cell of its own at the top of the notebook: the method captured long before the test cell wraps names
# (F.softmax captured alone was caught before issue 29: it calls the wrapped torch.Tensor.softmax)
CAPTURE = "import torch\n_captured = torch.Tensor.softmax\n"

# a call passed off as grader code: compiled under a file name in the grader's folder, found through gc
# (in the sandbox no oracle runs beside the learner's code, so a file name is no alibi there)
DISGUISED = """import gc
import types

import torch

gc.unfreeze()  # the fork server froze its heap (grader.boundary.heap): gc.get_objects skips it until thawed
_where = next(f.__globals__['GRADER_DIR'] for f in gc.get_objects()
              if type(f) is types.FunctionType and f.__name__ == '_called_by_learner')
exec(compile('def _sm(x, dim):\\n    return torch.softmax(x, dim)\\n', _where + '/spec.py', 'exec'))


def softmax(x, dim=-1):
    return _sm(x, dim)
"""

CASES = [
    # 6: hidden inputs drawn from a secret per grading, so a recorded table answers nothing
    Case("replay-recorded-inputs", lookup_table_softmax, WITHOUT_SOFTMAX),
    # 7: the kernel is forbidden, whatever the spelling
    Case("forbidden-torch-_softmax", cells(answers={"softmax": forbidden_softmax("torch._softmax(x, dim, False)")}),
         WITHOUT_SOFTMAX),
    Case("forbidden-TensorBase-softmax",
         cells(answers={"softmax": forbidden_softmax("torch._C.TensorBase.softmax(x, dim)")}), WITHOUT_SOFTMAX),
    Case("forbidden-method-softmax", cells(answers={"softmax": forbidden_softmax("x.softmax(dim)")}), WITHOUT_SOFTMAX),
    Case("forbidden-captured-before-test", cells(answers={"softmax": forbidden_softmax("_captured(x, dim=dim)")},
                                                 start=CAPTURE), WITHOUT_SOFTMAX),
    Case("forbidden-disguised-as-grader-code", cells(answers={"softmax": DISGUISED}), WITHOUT_SOFTMAX),
    Case("forbidden-safe-softmax", cells(answers={"softmax": forbidden_softmax("torch._safe_softmax(x, dim)")}),
         WITHOUT_SOFTMAX),
    # 7: side rules pay only beside a right answer
    Case("side-rule-softmax-returns-none", cells(answers={"softmax": "def softmax(x, dim=-1):\n    return None\n"}),
         WITHOUT_SOFTMAX),
    Case("side-rule-attention-always-raises", cells(answers={"scaled_dot_product_attention": RAISES}), 5.0),
]
