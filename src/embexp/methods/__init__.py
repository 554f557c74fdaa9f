"""Methods, one file each. Importing this package registers them all."""

from embexp.methods import baselines, ktoken, pema, peft_baselines, pete, prompt_compress, tinyattn, tinyte  # noqa: F401
from embexp.methods.base import Method, MethodConfig  # noqa: F401
from embexp.methods.registry import METHODS, build_method, register_method  # noqa: F401
