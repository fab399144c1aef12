"""A reference resolves: a value that names something names one that exists, is the one in effect, and this
process can use. Here: the module parameters the kernel command line and modprobe.d name, and the folders the stack
writes in (named by a variable, or its reader's default where unset)."""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from typing import Any

from jax_rocm7_plugin import _findings as catalog
from jax_rocm7_plugin._engine import RuleSet
from jax_rocm7_plugin._findings import Finding
from jax_rocm7_plugin._machine.identity import read_identity
from jax_rocm7_plugin._machine.kernel import KernelFacts
from jax_rocm7_plugin._machine.temp_dir import may_create_in
from jax_rocm7_plugin._machine.write_dirs import WriteDirs
from jax_rocm7_plugin._policy.grammar import PACKAGE_NAME
from jax_rocm7_plugin._policy.machine_needs import stack_modules
from jax_rocm7_plugin._policy.system_packages import reinstall_words
from jax_rocm7_plugin._policy.versions import pinned

RULES = RuleSet("references")


@RULES.rule("find", reads=("kernel",))
def _module_options(facts: Mapping[str, Any]) -> list[Finding]:
    """An option the kernel ignores: for a loaded module that has no such parameter (a misspelling), or for a module
    that is not loaded while a loaded one has that parameter (the option aimed at the wrong module). An option for a
    module that is not loaded and whose parameter no loaded module has is left alone: a module loaded later, or one
    the machine does not use."""
    kernel: KernelFacts | None = facts["kernel"]
    if kernel is None or kernel.loaded is None:
        return []
    stack = stack_modules()
    found = []
    for option in kernel.options:
        if option.module in kernel.loaded or option.module in kernel.in_sysfs:
            if option.module not in stack:
                continue  # another module's parameters may be hidden from sysfs by design
            shown = kernel.in_effect.get(option.module)  # listed from its parameters folder
            if shown and option.parameter not in shown:
                why = f"{option.module} has no parameter {option.parameter}"
                found.append(catalog.module_option_ignored(
                    option.module, option.parameter, option.value, option.source, why, None
                ))  # fmt: skip
            continue
        holders = kernel.parameter_holders.get(option.parameter, ())  # one only: where several have it, none
        instead = holders[0] if len(holders) == 1 else None
        if instead is not None and instead in stack:
            why = f"the module {option.module} is not loaded ({instead} is, and has {option.parameter})"
            found.append(catalog.module_option_ignored(
                option.module, option.parameter, option.value, option.source, why, instead
            ))  # fmt: skip
    return found


@RULES.rule("find", reads=("write-dirs", "checked"))
def _writable_dirs(facts: Mapping[str, Any]) -> list[Finding]:
    """The folders the stack writes in (set, or its readers' defaults), for a process that will run on a GPU: each
    exists or can be created, on a file system mounted writable, and this process may write there."""
    dirs: WriteDirs | None = facts["write-dirs"]
    machine = facts["checked"].facts.machine
    if dirs is None or machine is None or not machine.usable_gpus:
        return []
    identity = machine.identity or read_identity(machine.root)
    found = []
    for d in dirs.dirs:
        if not d.path.startswith("/"):
            continue
        if d.exists and not d.is_dir:
            why = "it is a file, not a folder"
        elif d.base is None:
            why = "a file stands where a folder above it should be"
        elif d.read_only:
            why = f"{d.base} is on a file system mounted read-only"
        elif not may_create_in(d.mode, d.uid, d.gid, identity):
            where = d.path if d.exists else f"{d.base} (where it would be created)"
            why = f"{where} has mode {d.mode:o}, owner uid {d.uid} gid {d.gid}; this process is uid {identity.uid}"
        else:
            continue
        found.append(catalog.write_dir_unusable(d.purpose, d.path, d.named_by, why, d.variable))
    return found


@RULES.rule("find", reads=("manifests",))
def _installs_as_installed(facts: Mapping[str, Any]) -> list[Finding]:
    """An install matches its manifest: a package's file missing or changed is another release's or a damaged one."""
    found = []
    for check in facts["manifests"] or ():
        if not (check.missing or check.changed) or not PACKAGE_NAME[check.system].fullmatch(check.package):
            continue  # a name no package database allows: no command is built from it
        if check.system == "pip":
            exact = pinned(f"{check.package}=={check.version}")
            wanted = f"{exact[0]}=={exact[1]}" if exact is not None else check.package
            step = shlex.join(["pip", "install", "--force-reinstall", "--no-deps", wanted])
        else:
            family = check.family or ("debian" if check.system == "dpkg" else "rhel")
            step = shlex.join([*reinstall_words(family), check.package])
        found.append(catalog.install_file_changed(
            check.system, check.package, check.version, check.missing, check.changed, step
        ))  # fmt: skip
    return found


@RULES.rule("find", reads=("kernel", "settings", "checked"))
def _config_where_read(facts: Mapping[str, Any]) -> list[Finding]:
    """A reader's own reference to the kernel's configuration (one path, machine_needs.json) resolves, where the
    variable under which it looks is on at its effective value (set, or the generated table's default)."""
    from jax_rocm7_plugin._environment import read
    from jax_rocm7_plugin._pipeline import rocm_install
    from jax_rocm7_plugin._policy.machine_needs import kernel_config_readers
    from jax_rocm7_plugin._policy.stack_variables import default_of

    kernel: KernelFacts | None = facts["kernel"]
    machine = facts["checked"].facts.machine
    if kernel is None or not kernel.release or machine is None or not machine.usable_gpus:
        return []
    environ = facts["settings"].environ or {}
    install = rocm_install(facts["checked"].facts)
    rocm = install.version if install is not None else None  # the release whose default runs where it is unset
    found = []
    for reader in kernel_config_readers():
        value = read(reader.asked_by, environ)
        effective = value if value is not None else default_of(reader.asked_by, reader.reader, rocm)
        try:
            if effective is None or int(effective.strip(), 0) == 0:
                continue
        except ValueError:
            continue  # a value its reader misreads: environment-variable-invalid says so
        path = reader.path.format(release=kernel.release)
        if path in kernel.readable_copies:
            continue
        asked = f"{reader.asked_by}={value}" if value is not None else f"{reader.asked_by} unset: {effective}"
        elsewhere = next((c for c in kernel.readable_copies if c != path), None)
        found.append(catalog.kernel_config_unseen(
            reader.reader, path, elsewhere or kernel.config_source, reader.options, asked, reader.effect,
            reader.force, reader.sources,
        ))  # fmt: skip
    return found
