"""The first thing every child of `child.py` runs: it makes the child unable to outlive its parent or its deadline.

Run as `python [-I -S] child_guard.py PARENT_PID SECONDS SCRIPT [ARGUMENTS...]`; stdlib only. A child runs in its
own session (so that a time-out kills whatever it started), which also means a kill of the parent's process group
never reaches it: a library whose constructor hangs would then keep the child alive for ever once the doctor or
`import jax` was killed while waiting. So before SCRIPT runs (and with it any library's code):

- the kernel is asked to SIGKILL this process when the thread that started it ends (PR_SET_PDEATHSIG; the runner
  waits for the child in that very thread, so it ends only with the parent or after the wait);
- a parent that is already gone (it died between fork and here) ends the child at once;
- an alarm is set a little after the parent's own limit, its default action ending the process, so a parent that is
  stopped (SIGSTOP, a debugger) or starved cannot leave it waiting either.
"""

import ctypes
import math
import os
import runpy
import signal
import sys

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
# The parent kills at its limit; the alarm is only for a parent that cannot, so it comes after.
ALARM_GRACE_SECONDS = 2


def guard(parent_pid: int, seconds: float) -> None:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):  # not Linux's prctl: the alarm and the check below still hold
        pass
    if os.getppid() != parent_pid:
        os._exit(125)  # reparented already: nobody waits for this answer
    signal.signal(signal.SIGALRM, signal.SIG_DFL)
    signal.alarm(max(1, math.ceil(seconds)) + ALARM_GRACE_SECONDS)


if __name__ == "__main__":
    guard(int(sys.argv[1]), float(sys.argv[2]))
    script = sys.argv[3]
    sys.argv = [script, *sys.argv[4:]]
    runpy.run_path(script, run_name="__main__")
