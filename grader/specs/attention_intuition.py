"""Hidden tests for chapter 01."""
import math

import torch

from grader.spec import Exercise, assert_tensor

gaussian_kernel = Exercise("gaussian_kernel", points=2, forbidden=("torch.distributions.Normal",))


@gaussian_kernel.check("normalised standard normal density at fixed points")
def _(fn):
    u = torch.tensor([0.0, 1.0, -2.0, 0.5])
    assert_tensor(fn(u), torch.exp(-u**2 / 2) / math.sqrt(2 * math.pi))
