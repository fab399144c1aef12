"""A fix the doctor can check: read the machine again as it would be after the fix, and say what remains.

A finding whose fix is a change of what the doctor reads (variables set or unset, group ids the process gains)
carries it as a `Remedy`. Here each such remedy is applied to the settings (the same environment with the change,
the same sysroot) and the whole plain diagnosis runs again. The remedy then holds the outcome, and the report says
"checked: ..." after the fix where the problem is gone and no new error appears, and what is still found where it
is not (`Finding.checked_fix`): a fix the rerun does not clear is a defect of the doctor, which the tests hold to
(tests/integration/test_remedies.py). The fix's own words stay the loader's, which checks nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from jax_rocm7_plugin._findings import Finding, Remedy
from jax_rocm7_plugin._settings import PJRT_LIBRARY, Settings, read_settings

NO_ERROR = "with this change the doctor finds no error"


def settings_after(settings: Settings, remedy: Remedy) -> Settings | None:
    """The settings of this process as they would be after `remedy` (None: the environment they came from is not
    known, so the change cannot be made)."""
    if settings.environ is None:
        return None
    environ = dict(settings.environ)
    if settings.pjrt_library is not None:  # --library is part of what was read
        environ[PJRT_LIBRARY] = str(settings.pjrt_library)
    for name, value in remedy.environment:
        if value is None:
            environ.pop(name, None)
        else:
            environ[name] = value
    changed = read_settings(environ, sysroot=settings.sysroot, platforms=None)
    return changed._replace(groups_added=tuple(dict.fromkeys((*settings.groups_added, *remedy.groups))))


def prove(
    found: Sequence[Finding], settings: Settings, rerun: Callable[[Settings], Sequence[Finding]]
) -> list[Finding]:
    """`found` with every remedy checked by `rerun` (the plain diagnosis of the changed settings): its outcome in
    the remedy (`Finding.checked_fix` says it after the fix). One rerun per distinct change."""
    before = {f.key for f in found if f.severity != "info"}
    outcomes: dict[Remedy, tuple[bool | None, str]] = {}
    result = []
    from jax_rocm7_plugin._binary.load_test import checking_fixes

    with checking_fixes(settings.load_timeout):  # every fix's loads together: one load limit at most
        for finding in found:
            result.append(_proved(finding, settings, rerun, before, outcomes))
    return result


def _proved(
    finding: Finding,
    settings: Settings,
    rerun: Callable[[Settings], Sequence[Finding]],
    before: set[tuple[str, str | None]],
    outcomes: dict[Remedy, tuple[bool | None, str]],
) -> Finding:
    remedy = finding.remedy
    if remedy is None or remedy.checked is not None or finding.severity == "info":
        return finding
    if remedy not in outcomes:
        outcomes[remedy] = _check(finding, remedy, settings, rerun, before)
    cleared, outcome = outcomes[remedy]
    return finding._replace(remedy=remedy._replace(checked=cleared, outcome=outcome))


def _check(
    finding: Finding,
    remedy: Remedy,
    settings: Settings,
    rerun: Callable[[Settings], Sequence[Finding]],
    before: set[tuple[str, str | None]],
) -> tuple[bool | None, str]:
    from jax_rocm7_plugin._binary.load_test import OutOfTime

    changed = settings_after(settings, remedy)
    if changed is None:
        return None, "the doctor could not check it (it does not know the environment it was started with)"
    try:
        after = [f for f in rerun(changed) if f.severity != "info"]
    except OutOfTime as spent:
        return None, f"the doctor could not check it in time: {spent}"
    still = [f for f in after if f.key == finding.key]
    errors = [f for f in after if f.severity == "error"]
    new_errors = [f for f in errors if f.key not in before]
    if still or new_errors:
        first = (still or new_errors)[0]
        return False, f"with {remedy.words()} the doctor still finds {first.id}: {first.summary}"
    outcome = NO_ERROR if not errors else f"with this change this problem is gone; {_ids(errors)} remain"
    warned = [f for f in after if f.severity == "warning" and f.key not in before]
    if warned:  # a consequence worth knowing (one GPU left meets a one-GPU bug): said, not a failure of the fix
        outcome += f" (it then warns: {'; '.join(f'{f.id}: {f.summary}' for f in warned)})"
    return True, outcome


def _ids(findings: Sequence[Finding]) -> str:
    return ", ".join(dict.fromkeys(f.known_issue or f.id for f in findings))
