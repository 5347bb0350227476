from tests.catalogue import Variant

WRONG = [
    Variant("gaussian_kernel", "unnormalised density", "def gaussian_kernel(u):\n    return torch.exp(-u**2 / 2)\n"),
]
CORRECT = [
    Variant("gaussian_kernel", "via log-density", "def gaussian_kernel(u):\n    return torch.exp(-0.5 * u * u - 0.5 * math.log(2 * math.pi))\n"),
]
