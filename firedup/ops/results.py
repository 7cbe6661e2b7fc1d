"""What a command did on several hosts, and the one rule that turns it into an exit code.

Each host gets its value or the DeployError it raised: one failure never hides another host's
outcome (design rule 9). Every task that runs on several hosts ends by the same rule
(docs/exit-codes.md): 0 when every host succeeded; otherwise the exit code the failed hosts
share, or 1 (DeployError's) when their codes differ. A value can be a failure too (a smoke
request answered badly): the task says which values fail, with their code.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Generic, TypeVar

from firedup.errors import DeployError

T = TypeVar("T")
MIXED_FAILURES_EXIT = DeployError.exit_code


def _never_fails(_value: object) -> int:
    return 0


class HostResults(Mapping[str, "T | DeployError"], Generic[T]):
    """Per host, in the order the hosts were given: the value, or the DeployError raised."""

    def __init__(
        self, results: Mapping[str, T | DeployError], code_of: Callable[[T], int] = _never_fails
    ) -> None:
        self._results = dict(results)
        self._code_of = code_of

    def __getitem__(self, host: str) -> T | DeployError:
        return self._results[host]

    def __iter__(self) -> Iterator[str]:
        return iter(self._results)

    def __len__(self) -> int:
        return len(self._results)

    def judged(self, code_of: Callable[[T], int]) -> HostResults[T]:
        """The same results, with `code_of` saying which values are failures (non-zero)."""
        return HostResults(self._results, code_of)

    def codes(self) -> dict[str, int]:
        """The exit code of each failed host, in host order."""
        codes = {}
        for host, result in self._results.items():
            code = result.exit_code if isinstance(result, DeployError) else self._code_of(result)
            if code:
                codes[host] = code
        return codes

    @property
    def errors(self) -> dict[str, DeployError]:
        return {h: r for h, r in self._results.items() if isinstance(r, DeployError)}

    @property
    def exit_code(self) -> int:
        """The one rule: 0 if all succeeded; else the failures' shared code, or 1 if mixed."""
        found = set(self.codes().values())
        if not found:
            return 0
        return found.pop() if len(found) == 1 else MIXED_FAILURES_EXIT

    def summary(self) -> str:
        failed = list(self.codes())
        return f"{len(failed)} of {len(self)} hosts failed: {', '.join(failed)}"
