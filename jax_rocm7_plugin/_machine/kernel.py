"""The running kernel as the stack depends on it: its release, how it was built, its command line, the modules
loaded, each module parameter in effect and what the system's modprobe configuration asks of them.

Formats (each read under the sysroot, bounded; a file missing or damaged is unknown, never an error):
- release: /proc/sys/kernel/osrelease (one line, as `uname -r`);
- build configuration: /proc/config.gz (gzip; CONFIG_IKCONFIG_PROC), else the distributions' copy, where each keeps
  it (/boot/config-<release>; /usr/lib/modules/<release>/config on Fedora CoreOS and Azure Linux; ostree's and
  kernel-install's folders; a source tree's .config): `CONFIG_X=y|m|<value>` lines, `# CONFIG_X is not set` for
  an option built out (Documentation/kbuild/kconfig.rst);
- command line: /proc/cmdline, words separated by blanks, `module.parameter=value` for a module's parameter
  (Documentation/admin-guide/kernel-parameters.rst: parameters of built-in and loadable modules alike);
- modules loaded: /proc/modules, the name first on each line (proc(5));
- parameters in effect: /sys/module/<module>/parameters/<parameter> (one value per file; Documentation/ABI/
  testing/sysfs-module), for the modules the configuration names and the GPU stack's own
  (_policy/machine_needs.json);
- modprobe configuration: `options <module> <parameter>=<value> ...` lines of *.conf files in /etc/modprobe.d,
  /run/modprobe.d, /usr/local/lib/modprobe.d, /usr/lib/modprobe.d and /lib/modprobe.d, a file of an earlier
  folder hiding one of the same name in a later (modprobe.d(5)).

The command line can carry credentials (iSCSI, NFS root, disk keys): only `module.parameter=` words are kept.
"""

from __future__ import annotations

import gzip
import io
import os
import zlib
from collections.abc import Iterable, Mapping
from pathlib import Path

from jax_rocm7_plugin._machine import host_path, text_under
from jax_rocm7_plugin._policy.machine_needs import stack_modules
from jax_rocm7_plugin._record import NamedTuple
from jax_rocm7_plugin._safe_io import read_file

OSRELEASE = "/proc/sys/kernel/osrelease"
CONFIG_GZ = "/proc/config.gz"
CONFIG_COPIES = ("/boot/config-{release}", "/usr/lib/modules/{release}/config", "/lib/modules/{release}/config",
                 "/usr/lib/ostree-boot/config-{release}", "/usr/lib/kernel/config-{release}",
                 "/usr/src/linux-{release}/.config")  # fmt: skip
CMDLINE = "/proc/cmdline"
MODULES = "/proc/modules"
MODPROBE_DIRS = ("/etc/modprobe.d", "/run/modprobe.d", "/usr/local/lib/modprobe.d", "/usr/lib/modprobe.d",
                 "/lib/modprobe.d")  # fmt: skip
MAX_CONFIG_BYTES = 4 * 1024 * 1024  # a distribution kernel's configuration is about 300 KB
MAX_SMALL_BYTES = 256 * 1024
MAX_MODPROBE_FILES = 200
MAX_PARAMETERS = 400
MAX_MODULES_LOOKED_AT = 2000  # loaded modules searched for a parameter an option aims at a module not loaded


class ModuleOption(NamedTuple):
    """A value the configuration asks of a module parameter."""

    module: str
    parameter: str
    value: str
    source: str  # "/proc/cmdline" or the modprobe.d file


class KernelFacts(NamedTuple):
    release: str | None
    config: Mapping[str, str] | None  # CONFIG_X -> "y", "m", "n" (built out) or its value; None: not readable
    config_source: str | None
    options: tuple[ModuleOption, ...]  # the command line's first, then modprobe.d's in the order modprobe reads
    loaded: frozenset[str] | None  # None: /proc/modules unreadable
    in_effect: Mapping[str, Mapping[str, str]]  # module -> parameter -> value, for the modules read
    # The copies of the configuration this process can read (of CONFIG_COPIES): a reader that looks in one place
    # only (RCCL: /boot/config-<release>) misses a configuration kept in another.
    readable_copies: tuple[str, ...] = ()
    # The modules the configuration names that /sys/module shows (loaded, or built in: those /proc/modules omits).
    in_sysfs: frozenset[str] = frozenset()
    # For each parameter an option sets on a module /sys/module does not show: the loaded modules that have it.
    parameter_holders: Mapping[str, tuple[str, ...]] = {}

    def option(self, name: str) -> str | None:
        """A configuration option's value ("n" where built out; None where the configuration is not known or does
        not name it)."""
        return None if self.config is None else self.config.get(name)


def parse_config(text: str) -> dict[str, str]:
    """Kconfig's saved configuration: `CONFIG_X=value` and `# CONFIG_X is not set` (as "n")."""
    found: dict[str, str] = {}
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("CONFIG_") and "=" in line:
            name, _, value = line.partition("=")
            found[name] = value.strip('"')
        elif line.startswith("# CONFIG_") and line.endswith(" is not set"):
            found[line[2:].split()[0]] = "n"
    return found


def _readable_copies(root: Path, release: str | None) -> tuple[str, ...]:
    """The distributions' copies of the configuration (CONFIG_COPIES) that are regular files this process can read."""
    if not release or "/" in release:
        return ()
    paths = [where.format(release=release) for where in CONFIG_COPIES]
    return tuple(p for p in paths if os.path.isfile(host_path(root, p)) and os.access(host_path(root, p), os.R_OK))


def _config(root: Path, copies: tuple[str, ...]) -> tuple[dict[str, str] | None, str | None]:
    """/proc/config.gz, else the first of `copies` that reads whole."""
    try:
        packed = read_file(host_path(root, CONFIG_GZ), MAX_CONFIG_BYTES)
        with gzip.GzipFile(fileobj=io.BytesIO(packed)) as stream:
            text = stream.read(MAX_CONFIG_BYTES + 1)
        if len(text) <= MAX_CONFIG_BYTES:
            return parse_config(text.decode("utf-8", "replace")), CONFIG_GZ
    except (OSError, EOFError, ValueError, zlib.error):
        pass
    for path in copies:
        text = text_under(root, path, MAX_CONFIG_BYTES)
        if text is not None:
            return parse_config(text), path
    return None, None


def cmdline_options(text: str | None) -> list[ModuleOption]:
    """The `module.parameter=value` words of a kernel command line (a dash and an underscore are one in a module's
    and a parameter's name, as the kernel reads them)."""
    found = []
    for word in (text or "").split():
        name, equals, value = word.partition("=")
        module, dot, parameter = name.partition(".")
        if equals and dot and module and parameter:
            found.append(ModuleOption(module.replace("-", "_"), parameter.replace("-", "_"), value.strip('"'), CMDLINE))
    return found


def modprobe_options(root: Path) -> list[ModuleOption]:
    """The `options` lines of the modprobe configuration, as modprobe orders its files."""
    chosen: dict[str, str] = {}  # file name -> the path read (the first folder that has it)
    for folder in MODPROBE_DIRS:
        try:
            names = sorted(os.listdir(host_path(root, folder)))[:MAX_MODPROBE_FILES]
        except (OSError, ValueError):
            continue
        for name in names:
            if name.endswith(".conf"):
                chosen.setdefault(name, f"{folder}/{name}")
    found = []
    for name in sorted(chosen):
        text = text_under(root, chosen[name], MAX_SMALL_BYTES)
        for line in (text or "").splitlines():
            words = line.split("#", 1)[0].split()
            if len(words) >= 3 and words[0] == "options":
                module = words[1].replace("-", "_")
                for word in words[2:]:
                    parameter, equals, value = word.partition("=")
                    if equals:
                        found.append(ModuleOption(module, parameter.replace("-", "_"), value.strip('"'), chosen[name]))
    return found


def _parameters(root: Path, modules: Iterable[str]) -> dict[str, dict[str, str]]:
    read: dict[str, dict[str, str]] = {}
    count = 0
    for module in dict.fromkeys(modules):
        if not _plain(module):
            continue
        folder = host_path(root, f"/sys/module/{module}/parameters")
        try:
            names = sorted(os.listdir(folder))
        except (OSError, ValueError):
            continue
        values = read.setdefault(module, {})
        for name in names:
            count += 1
            if count > MAX_PARAMETERS:
                return read
            text = text_under(root, f"/sys/module/{module}/parameters/{name}", 64 * 1024)
            if text is not None:
                values[name] = text.strip()
    return read


def read_kernel(root: Path) -> KernelFacts:
    release = (text_under(root, OSRELEASE, MAX_SMALL_BYTES) or "").strip() or None
    copies = _readable_copies(root, release)
    config, source = _config(root, copies)
    options = [*cmdline_options(text_under(root, CMDLINE, MAX_SMALL_BYTES)), *modprobe_options(root)]
    modules = text_under(root, MODULES, 4 * 1024 * 1024)
    loaded = None if modules is None else frozenset(line.split()[0] for line in modules.splitlines() if line.split())
    # The GPU stack's modules' parameters are read whether the configuration names them or not.
    in_effect = _parameters(root, [*sorted(stack_modules()), *(o.module for o in options)])
    in_sysfs = frozenset(
        o.module for o in options if _plain(o.module) and os.path.isdir(host_path(root, f"/sys/module/{o.module}"))
    )
    absent = {o.parameter for o in options if o.module not in (loaded or ()) and o.module not in in_sysfs}
    holders = {
        parameter: tuple(
            module
            for module in sorted(loaded or ())[:MAX_MODULES_LOOKED_AT]
            if os.path.exists(host_path(root, f"/sys/module/{module}/parameters/{parameter}"))
        )
        for parameter in sorted(absent)
        if _plain(parameter)
    }
    return KernelFacts(release, config, source, tuple(options), loaded, in_effect, copies, in_sysfs, holders)


def _plain(name: str) -> bool:
    """A module's or a parameter's name that stays one path component under /sys/module."""
    return bool(name) and "/" not in name and not name.startswith(".")
