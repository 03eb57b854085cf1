"""Task groups wrap what their body raised; callers of the engine want the error itself."""

from __future__ import annotations


def sole_error(group: BaseExceptionGroup[BaseException]) -> BaseException:
    """The one real error inside (nested) exception groups, else the group itself.

    Cancellations that merely followed the real error do not count.
    """
    leaves: list[BaseException] = []

    def walk(g: BaseExceptionGroup[BaseException]) -> None:
        for exc in g.exceptions:
            if isinstance(exc, BaseExceptionGroup):
                walk(exc)
            else:
                leaves.append(exc)

    walk(group)
    import anyio

    real = [e for e in leaves if not isinstance(e, anyio.get_cancelled_exc_class())]
    if len(real) == 1:
        return real[0]
    return group
