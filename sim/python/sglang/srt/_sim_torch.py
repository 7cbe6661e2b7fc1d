"""Just enough of `torch` / `torch.nn` for the stand-in model files (no GPU, no tensors)."""

from __future__ import annotations

import types
from typing import Any


class Tensor:
    def __init__(self, name: str = "tensor", shape: tuple[int, ...] = ()) -> None:
        self.name = name
        self.shape = shape

    def __repr__(self) -> str:
        return f"Tensor({self.name}, shape={self.shape})"


class dtype(str):
    pass


bfloat16 = dtype("torch.bfloat16")
float16 = dtype("torch.float16")


class device(str):
    pass


class OutOfMemoryError(RuntimeError):
    pass


# Tracebacks print the exception as `torch.OutOfMemoryError: ...`, as real torch does.
OutOfMemoryError.__module__ = "torch"
OutOfMemoryError.__qualname__ = "OutOfMemoryError"


def cat(tensors: list[Tensor], dim: int = 0) -> Tensor:
    return Tensor("cat")


concat = cat


class Module:
    """torch.nn.Module stand-in: a missing attribute raises the same AttributeError text."""

    dtype = bfloat16

    def __init__(self) -> None:
        pass

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.forward(*args, **kwargs)

    def to(self, *args: Any, **kwargs: Any) -> Module:
        return self

    def named_parameters(self, remove_duplicate: bool = True) -> Any:
        return iter(())


nn = types.SimpleNamespace(Module=Module)
torch = types.SimpleNamespace(
    Tensor=Tensor,
    dtype=dtype,
    device=device,
    bfloat16=bfloat16,
    float16=float16,
    cat=cat,
    concat=concat,
    OutOfMemoryError=OutOfMemoryError,
)
