"""The trusted side's answers to the sandboxed child (issue 29, sections 1 and 2): an explicit set of
operations on objects handed out for the purpose, plain data back, and a check's objects never
changed by the learner's code, whatever the child sends. Each attack runs inside a learner function
in a forked child (tests.helpers.evaluate_in_child) and reports what got through."""
import torch
import torch.nn as nn

from grader.boundary.spec import Exercise, changed_in_place
from tests.helpers import evaluate_in_child

ATTACKS = '''
import gc
gc.unfreeze()  # the fork server froze its heap (grader.boundary.heap): gc.get_objects skips it until thawed

def _endpoint():
    return next(o for o in gc.get_objects()
                if type(o).__name__ == 'Endpoint' and type(o.codec).__name__ == 'WorkerCodec')

def _stub_class():
    # getattr: the test process forked here may still hold an earlier test's proxies, whose mirrored class
    # can claim to be a type while `__name__` is never served
    return next(o for o in gc.get_objects() if isinstance(o, type) and getattr(o, '__name__', None) == 'TrustedStub')

def attack(x, model, gen):
    """Every way tried to make the trusted side run or hand out something; the ones that got through."""
    ep, Stub = _endpoint(), _stub_class()
    key = ep.codec.foreign[id(x)][1]
    tries = {
        'getattr numpy of a check tensor': lambda: ep.request('cb_getattr', x, 'numpy')(),
        'attribute tolist of a check tensor': lambda: ep.request('cb_attribute', x, 'tolist'),
        'call a check tensor': lambda: ep.request('cb_call', x, [], {}, [], [], False, torch.get_rng_state()),
        'echo of the tensor key as a function': lambda: Stub(ep, key, 'function')(),
        'echo of every key, numpy': lambda: [ep.request('cb_attribute', Stub(ep, k, 'function'), 'numpy')
                                             for k in range(1, 40)],
        'a model method torch defines': lambda: model.state_dict(),
        'a model method by attribute': lambda: model.parameters(),
        'register a hook on the model': lambda: model.register_forward_hook(print),
        'a submodule of the model': lambda: model.inner.weight.numpy(),
        'the class of the model': lambda: ep.request('cb_attribute', model, '__class__'),
        'private names': lambda: ep.request('cb_attribute', model, '_modules'),
        'a parameter copy has methods back home': lambda: ep.request('cb_attribute', model.first, 'numpy'),
        'cb_new on a torch class': lambda: ep.request('cb_new', torch.nn.Linear, [2, 2], {}),
        'the model as an argument to a stand-in': lambda: Tiny(model),
        'the model inside an argument': lambda: Tiny(2)._bridge[1]([{'m': model}]),
        'cb_new on the handed-over model': lambda: ep.request('cb_new', model, [], {}),
        'cb_forward on the handed-over model': lambda: ep.request(
            'cb_forward', model, '', [], {}, [], {}, [], [], False, torch.get_rng_state()),
        'a named method': lambda: ep.request('_run', model, [], {}, [], [], False, torch.get_rng_state()),
        'an unknown operation': lambda: ep.request('cb_eval', 'print(1)'),
        'mode of a stand-in function': lambda: ep.request('cb_mode', Stub(ep, 1, 'function'), False),
        'a built module outside its own parameters': lambda: ep.request(
            'cb_forward', Tiny(2)._bridge[1], 'inner', ['first'], {'training': {}, 'p': {}, 'fixed': {}, 'buffers': {}},
            [torch.ones(2)], {}, [torch.ones(2)], [], False, torch.get_rng_state()),
        'a built module with a path that is not one of its modules': lambda: ep.request(
            'cb_forward', Tiny(2)._bridge[1], 'linear.weight', [],
            {'training': {}, 'p': {}, 'fixed': {}, 'buffers': {}}, [torch.ones(2)], {}, [], [], False,
            torch.get_rng_state()),
    }
    got = []
    for name, go in tries.items():
        try:
            go()
            got.append(name)
        except Exception:
            pass
    # what the learner's code may do: read data, call the model and its own interface, switch its mode
    assert type(model.first) is torch.Tensor and model.block_size == 3 and model.training
    assert model.eval() is model and not model.training
    model.first.zero_()  # a copy: the trusted model keeps its values
    assert torch.equal(model(torch.ones(3)), model.double_it(torch.ones(3)) / 2)
    assert Tiny(2)(torch.ones(1, 2)).shape == (1, 2)
    x.zero_()  # counts against the in-place rule only
    gen.manual_seed(0)
    return got
'''


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.block_size = 3
        self.first = nn.Parameter(torch.arange(3.0))
        self.inner = nn.Linear(3, 3)

    def forward(self, x):
        return x * self.first

    def double_it(self, x):
        return 2 * self(x)


class Tiny(nn.Module):
    """A stand-in class."""

    def __init__(self, d):
        super().__init__()
        self.linear = nn.Linear(d, d)

    def forward(self, x):
        return self.linear(x)


def test_the_child_gets_only_the_operations_served_and_plain_data():
    outcome = {}
    exercise = Exercise("attack", 1, stand_ins={"Tiny": Tiny})

    @exercise.check("nothing got through")
    def _(fn):
        model, x, gen = Model(), torch.ones(4), torch.Generator().manual_seed(5)
        kept_x, kept_first, kept_gen = x.clone(), model.first.detach().clone(), gen.get_state()
        outcome["got"] = fn(x, model, gen)
        outcome["kept"] = (torch.equal(x, kept_x) and torch.equal(model.first.detach(), kept_first)
                           and torch.equal(gen.get_state(), kept_gen) and not model.training)
        outcome["recorded"] = (changed_in_place(x, kept_x), changed_in_place(gen, kept_gen))

    namespace: dict = {"torch": torch}
    exec(ATTACKS, namespace)
    result = evaluate_in_child(exercise, namespace)
    assert not result.failed and result.zero_reason is None, result.report()
    assert outcome["got"] == []
    assert outcome["kept"]  # the check's tensor, parameter and generator as they were; the mode switched
    assert outcome["recorded"] == (True, True)
