"""``golden.tensorcore`` offers every public name of its modules, as their ``__all__`` list
them: code written against the one-module package keeps working."""

import golden.tensorcore as tc
from golden.tensorcore import asm, isa, iss


def test_every_public_name_of_the_modules_is_offered_by_the_package():
    for module in (isa, asm, iss):
        for name in module.__all__:
            assert getattr(tc, name) is getattr(module, name), f"{module.__name__}.{name}"
