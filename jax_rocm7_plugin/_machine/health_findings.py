"""A node's health judged: one finding per fault, naming the GPU, its PCI address, what was read and what to do.

The rules (their data and sources: _policy/node_health.json):
- any uncorrectable error is a warning; counters the driver cannot read now (a reset) are one too;
- retired VRAM pages count against the driver's own threshold; a page it could not retire always counts;
- corrected errors say something only against the GPU's peers (or as a rate: `rising`);
- a PCIe link narrower than both its ends can do, or slower where the GPU kind keeps its speed at rest;
- on a baseboard whose GPUs are one XGMI hive, a GPU outside it, and a hive member KFD links to fewer peers;
- partition modes: GPUs of one host in different modes is a warning, a mode set on purpose only info;
- a power cap under the default and a forced performance level are info (an administrator's choice);
- an idle GPU that runs hot; the host settings AMD documents for Instinct nodes.
A healthy GPU gets nothing.
"""

from __future__ import annotations

from collections import Counter
from statistics import median

from jax_rocm7_plugin._findings import Concerns, Finding, gpu_refs, node_health
from jax_rocm7_plugin._machine.gpu_health import GpuHealth, NodeHealth
from jax_rocm7_plugin._policy import node_health as policy

_RESET = "reset the GPU (as root: amd-smi reset --gpureset -g {ordinal}) or reboot the node"
_DRAIN = "drain this node (take it out of the scheduler) and "


def health_findings(node: NodeHealth) -> list[Finding]:
    found: list[Finding] = []
    for gpu in node.gpus:
        own = [*_errors(gpu), *_bad_pages(gpu, node.bad_page_parameter), *_link(gpu), *_power(gpu)]
        found.extend(_about((gpu,), own))
    found.extend(_correctable_outliers(node.gpus))
    found.extend(_xgmi(node.gpus))
    found.extend(_partitions(node.gpus))
    found.extend(_host(node))
    return found


def rising(before: NodeHealth, after: NodeHealth, seconds: float) -> list[Finding]:
    """What moved between two reads `seconds` apart: new uncorrectable errors, a reset begun (the counters
    unreadable since), PCIe replays faster than the threshold, corrected errors by the hundred (a rate)."""
    found: list[Finding] = []
    earlier = {g.pci: g for g in before.gpus if g.pci is not None}
    limit = policy.threshold("replays_per_minute")
    for gpu in after.gpus:
        old = earlier.get(gpu.pci)
        if old is not None:
            found.extend(_about((gpu,), _risen(old, gpu, seconds, limit)))
    return found


def _risen(old: GpuHealth, gpu: GpuHealth, seconds: float, limit: float) -> list[Finding]:
    found: list[Finding] = []
    if gpu.replays is not None and old.replays is not None and gpu.replays > old.replays:
        per_minute = (gpu.replays - old.replays) * 60 / max(seconds, 1e-3)
        if per_minute > limit and gpu.replays - old.replays > limit:  # a short window: a rate and a count
            found.append(
                node_health(
                    "pcie-replays-rising",
                    "warning",
                    f"{gpu.where()}: its PCIe link replayed {gpu.replays - old.replays} packets in {seconds:.0f} s "
                    f"({per_minute:.0f} a minute, over the {limit:g} a minute DCGM warns at): the link is noisy",
                    f"{_DRAIN}reseat the GPU or check its slot, riser and cables; then reboot",
                    (f"{gpu.device_path('pcie_replay_count')}: {old.replays} then {gpu.replays}",),
                )
            )
    if gpu.ras_inaccessible and not old.ras_inaccessible:
        found.append(
            node_health(
                "gpu-ras-inaccessible",
                "warning",
                f"{gpu.where()}: its error counters became unreadable in the last {seconds:.0f} s, as during a "
                "GPU reset",
                "look for amdgpu reset errors in `dmesg`; " + _DRAIN + _RESET.format(ordinal=gpu.ordinal),
                tuple(f"{path}: Query currently inaccessible" for path in gpu.ras_inaccessible),
            )
        )
    corrected = gpu.correctable - old.correctable
    if old.ras and corrected >= policy.threshold("correctable_outlier_min"):
        found.append(
            node_health(
                "gpu-correctable-errors",
                "warning",
                f"{gpu.where()} corrected {corrected} errors in {seconds:.0f} s: corrected errors that climb "
                "often turn into uncorrectable ones",
                "watch it (amd-smi metric --ecc); plan to drain the node and have the GPU checked",
                tuple(f"{b.path}: ce {b.ce}" for b in gpu.ras if b.ce),
            )
        )
    if gpu.uncorrectable > old.uncorrectable:
        blocks = ", ".join(f"{b.name} +{b.ue - _ue(old, b.name)}" for b in gpu.ras if b.ue > _ue(old, b.name))
        found.append(
            node_health(
                "gpu-uncorrectable-errors",
                "warning",
                f"{gpu.where()} had {gpu.uncorrectable - old.uncorrectable} new uncorrectable error(s) in "
                f"{seconds:.0f} s ({blocks})",
                _DRAIN + _RESET.format(ordinal=gpu.ordinal),
                tuple(f"{b.path}: ue {_ue(old, b.name)} then {b.ue}" for b in gpu.ras if b.ue > _ue(old, b.name)),
            )
        )
    return found


def _about(gpus: tuple[GpuHealth, ...], found: list[Finding]) -> list[Finding]:
    """`found` (the findings of these GPUs' own state) saying, as data, that they concern them."""
    return [f._replace(concerns=Concerns(gpus=gpu_refs(gpus))) for f in found]


def _ue(gpu: GpuHealth, block: str) -> int:
    return next((b.ue for b in gpu.ras if b.name == block), 0)


def _errors(gpu: GpuHealth) -> list[Finding]:
    found = []
    failing = [b for b in gpu.ras if b.ue > 0]
    if failing:
        blocks = ", ".join(f"{b.name} {b.ue}" for b in failing)
        xgmi = any(b.name.startswith("xgmi") for b in failing)
        found.append(
            node_health(
                "gpu-uncorrectable-errors",
                "warning",
                f"{gpu.where()} has had {gpu.uncorrectable} uncorrectable error(s) since the driver loaded "
                f"({blocks}): programs on it can fail or hang"
                + (", and its XGMI links to other GPUs are affected" if xgmi else ""),
                _DRAIN
                + _RESET.format(ordinal=gpu.ordinal)
                + "; if the errors come back, have the GPU (or its baseboard) serviced",
                tuple(f"{b.path}: ue {b.ue}, ce {b.ce}" + (f", de {b.de}" if b.de else "") for b in failing),
            )
        )
    if gpu.ras_inaccessible:
        found.append(
            node_health(
                "gpu-ras-inaccessible",
                "warning",
                f"{gpu.where()}: the driver cannot read its error counters now, as during a GPU reset",
                "wait for the reset to finish and run the doctor again; if it stays so, look for amdgpu reset "
                "errors in `dmesg` and reboot the node",
                tuple(f"{path}: Query currently inaccessible" for path in gpu.ras_inaccessible),
            )
        )
    return found


def _bad_pages(gpu: GpuHealth, parameter: int | None) -> list[Finding]:
    pages = gpu.bad_pages
    if pages is None:
        return []
    limit = policy.bad_page_threshold(parameter, gpu.target, gpu.vram_bytes)
    counted = pages.retired + pages.pending + pages.failed
    near = limit is not None and counted >= limit * policy.threshold("bad_pages_warn_fraction")
    if not near and pages.failed == 0:
        return []
    if pages.failed:
        summary = f"{gpu.where()}: the driver could not retire {pages.failed} bad VRAM page(s), which stay in use"
    else:
        summary = f"{gpu.where()} has {counted} bad VRAM pages, " + (
            f"past the driver's threshold of {limit}"
            if limit is not None and counted >= limit
            else f"over half of the driver's threshold of {limit}, past which it stops trusting the GPU"
        )
    return [
        node_health(
            "gpu-pages-retired",
            "warning",
            summary,
            _DRAIN + "have the GPU checked and replaced while it still works; reboot to retire pending pages",
            (
                f"{pages.path}: {pages.retired} retired (R), {pages.pending} pending (P), {pages.failed} failed (F)",
                f"threshold: {limit if limit is not None else 'none'} (amdgpu bad_page_threshold="
                f"{parameter if parameter is not None else 'not readable, taken as -1'})",
            ),
        )
    ]


def _link(gpu: GpuHealth) -> list[Finding]:
    link = gpu.link
    rules = policy.rules(gpu.target, gpu.device_id)
    if link is None or rules.integrated or rules.kind == "unknown":
        return []
    narrow = link.width is not None and link.best_width is not None and link.width < link.best_width
    slow = (
        rules.link_speed_at_rest and link.speed is not None and link.best_speed is not None
        and link.speed < link.best_speed
    )  # fmt: skip
    if not (narrow or slow):
        return []
    now = f"{_speed(link.speed)} x{link.width}"
    best = f"{_speed(link.best_speed)} x{link.best_width}"
    evidence = [
        f"{link.port}: current_link_speed {_speed(link.speed)}, current_link_width {link.width}, "
        f"max_link_speed {_speed(link.max_speed)}, max_link_width {link.max_width}"
    ]
    if link.through_card_switch:
        evidence.append("the card carries its own PCIe switch: this is its upstream port, the link to the host")
    if link.above_max_speed is not None or link.above_max_width is not None:
        evidence.append(f"the port above it can do {_speed(link.above_max_speed)} x{link.above_max_width}")
    return [
        node_health(
            "pcie-link-degraded",
            "warning",
            f"{gpu.where()}: its PCIe link trained at {now}, below the {best} both ends can do: transfers between "
            "host and GPU (and PCIe peer traffic) run slower",
            f"{_DRAIN}reseat the GPU, or check its slot, riser and cables and the firmware's PCIe settings; then "
            "reboot",
            tuple(evidence),
        )
    ]


def _speed(value: float | None) -> str:
    return f"{value:g} GT/s" if value is not None else "unknown speed"


def _power(gpu: GpuHealth) -> list[Finding]:
    found = []
    cap, default = gpu.power_cap_watts, gpu.power_cap_default_watts
    if cap is not None and default is not None and cap < default * 0.99:
        found.append(
            node_health(
                "gpu-power-capped",
                "info",
                f"{gpu.where()}: its power cap is {cap:g} W, under its default {default:g} W: it runs slower "
                "under load",
                "nothing if an administrator set it on purpose; to restore it, as root: write "
                f"{int(default * 1e6)} to its hwmon power1_cap",
                (f"{gpu.device_path('hwmon')}: power1_cap {cap:g} W, power1_cap_default {default:g} W",),
            )
        )
    level = gpu.performance_level
    if level is not None and level not in ("auto", "unknown"):
        path = gpu.device_path("power_dpm_force_performance_level")
        found.append(
            node_health(
                "gpu-performance-level",
                "info",
                f"{gpu.where()}: its performance level is forced to '{level}'"
                + (" (the lowest clocks)" if level == "low" else ""),
                f"nothing if it was set on purpose; else, as root: echo auto > {path}",
                (f"{path}: {level}",),
            )
        )
    hottest = max(gpu.temperatures, key=lambda t: t[1], default=None)
    limit = policy.threshold("hot_at_rest_celsius")
    if gpu.busy_percent == 0 and hottest is not None and hottest[1] >= limit:
        found.append(
            node_health(
                "gpu-hot-at-rest",
                "warning",
                f"{gpu.where()} is idle but at {hottest[1]:g} C ({hottest[0]}), over the {limit:g} C an idle GPU "
                "stays well under: it will throttle under load",
                f"{_DRAIN}check its cooling: fans, airflow, blanking panels and the inlet temperature",
                (
                    f"{gpu.device_path('gpu_busy_percent')}: 0",
                    *(f"{gpu.device_path('hwmon')}: {label} {value:g} C" for label, value in gpu.temperatures),
                ),
            )
        )
    return found


def _correctable_outliers(gpus: tuple[GpuHealth, ...]) -> list[Finding]:
    counted = [g for g in gpus if g.ras]
    if len(counted) < 2:
        return []
    factor, least = policy.threshold("correctable_outlier_factor"), policy.threshold("correctable_outlier_min")
    if all(g.correctable < least for g in counted):
        return []
    found = []
    for gpu in counted:
        peers = median(g.correctable for g in counted if g is not gpu)
        if gpu.correctable >= least and gpu.correctable >= factor * max(peers, 1):
            found.append(
                node_health(
                    "gpu-correctable-errors",
                    "warning",
                    f"{gpu.where()} has corrected {gpu.correctable} errors, {factor:g} times or more its peers' "
                    f"median ({peers:g}): corrected errors that climb often turn into uncorrectable ones",
                    "watch it (`doctor` again later, or amd-smi metric --ecc); plan to drain the node and have the "
                    "GPU checked",
                    tuple(f"{b.path}: ce {b.ce}" for b in gpu.ras if b.ce),
                    (gpu,),
                )
            )
    return found


def _xgmi(gpus: tuple[GpuHealth, ...]) -> list[Finding]:
    found = []
    boards = [g for g in gpus if policy.on_xgmi_platform(g.device_id) and g.hive is not None]
    hives = Counter(g.hive for g in boards if g.hive)
    if len(boards) >= 2:
        main = hives.most_common(1)[0][0] if hives else None
        for gpu in boards:
            if gpu.hive != main:
                peers = len(boards) - 1
                found.append(
                    node_health(
                        "xgmi-link-missing",
                        "warning",
                        f"{gpu.where()} is outside the XGMI hive of its {peers} peer(s) on this baseboard: its "
                        "traffic to them goes over PCIe, several times slower, and collectives wait for it",
                        f"{_DRAIN}power-cycle it (XGMI links train at boot); if the GPU stays out, the GPU or "
                        "baseboard needs service",
                        (
                            f"hive id {gpu.hive or 'none'} (its peers: {main or 'none'})",
                            f"KFD gives it XGMI links to {len(gpu.xgmi_peers)} of its {peers} peers",
                        ),
                        (gpu,),
                    )
                )
    for hive in hives:
        members = [g for g in gpus if g.hive == hive]
        if len(members) < 2 or not any(g.xgmi_peers for g in members):
            continue  # KFD's links not readable here: the hive alone says nothing more
        ordinals = {g.ordinal for g in members}
        for gpu in members:
            missing = sorted(ordinals - {gpu.ordinal} - set(gpu.xgmi_peers))
            if missing:
                found.append(
                    node_health(
                        "xgmi-link-missing",
                        "warning",
                        f"{gpu.where()} has no XGMI link to GPU {', '.join(map(str, missing))} of its hive: that "
                        "traffic goes over PCIe",
                        f"{_DRAIN}power-cycle it; if the link stays down, the GPU or baseboard needs service",
                        (f"KFD io_links/p2p_links of type 11 (XGMI) reach GPUs {list(gpu.xgmi_peers)}",),
                        (gpu,),
                    )
                )
    return found


def _partitions(gpus: tuple[GpuHealth, ...]) -> list[Finding]:
    moded = [
        g for g in gpus
        if policy.rules(g.target, g.device_id).partitions and g.compute_partition not in (None, "UNKNOWN")
    ]  # fmt: skip
    if not moded:
        return []
    modes = Counter((g.compute_partition, g.memory_partition) for g in moded)
    (usual, usual_count), *others = modes.most_common()
    if others:
        return [
            node_health(
                "gpu-partition-mixed",
                "warning",
                f"{gpu.where()} is in {gpu.compute_partition}/{gpu.memory_partition}, unlike the {usual_count} "
                f"other GPU(s) of this host in {usual[0]}/{usual[1]}: jax sees a different number of devices "
                "per GPU, and sharded programs place work unevenly",
                f"set every GPU of the host to one mode, as root: amd-smi set --compute-partition {usual[0]} "
                f"--memory-partition {usual[1]}",
                (f"{gpu.device_path('current_compute_partition')}: {gpu.compute_partition}",),
                (gpu,),
            )
            for gpu in moded
            if (gpu.compute_partition, gpu.memory_partition) != usual
        ]
    compute, memory = usual
    if (compute, memory) == policy.default_modes():
        return []
    per_gpu = policy.devices_per_gpu(compute or "", moded[0].device_id)
    count = f" ({per_gpu * len(moded)} in all)" if per_gpu else ""
    each = f"{per_gpu} devices" if per_gpu else "several devices"
    return [
        node_health(
            "gpu-partition-mode",
            "info",
            f"the {len(moded)} partitionable GPU(s) are in {compute}/{memory}: each is {each} in jax.devices()"
            f"{count}, each device a share of the GPU's compute units and memory",
            "nothing if it was set on purpose; for one device per GPU, as root: amd-smi set --compute-partition "
            "SPX --memory-partition NPS1",
            tuple(f"{g.where()}: {g.compute_partition}/{g.memory_partition}" for g in moded),
            moded,
        )
    ]


def _host(node: NodeHealth) -> list[Finding]:
    host = node.host
    found = []
    instinct = [g for g in node.gpus if policy.rules(g.target, g.device_id).kind == "instinct"]
    if instinct and host.cmdline is not None:
        words = host.cmdline.split()
        off = {"iommu=off", "amd_iommu=off", "intel_iommu=off"} & set(words)
        if "iommu=pt" not in words and not off:
            needed = policy.threshold("iommu_required_cpus")
            required = host.logical_cpus is not None and host.logical_cpus >= needed
            found.append(
                node_health(
                    "host-iommu-not-pt",
                    "warning" if required else "info",
                    "the kernel runs without iommu=pt"
                    + (
                        f": AMD requires it on hosts with {needed:g} or more logical CPUs (this one: "
                        f"{host.logical_cpus}), and RCCL can hang without it"
                        if required
                        else ": RCCL warns without it on Instinct hosts, and collectives can hang"
                    ),
                    "add iommu=pt to the kernel command line (GRUB_CMDLINE_LINUX in /etc/default/grub), update "
                    "grub and reboot",
                    (
                        f"/proc/cmdline, its IOMMU words: {host.cmdline or 'none'}",
                        f"{host.logical_cpus} logical CPUs online",
                    ),
                )
            )
    if instinct and host.numa_balancing == 1:
        found.append(
            node_health(
                "host-numa-balancing",
                "info",
                "NUMA auto-balancing is on: AMD suggests trying Instinct workloads with it off",
                "try it both ways: sudo sysctl kernel.numa_balancing=0",
                ("/proc/sys/kernel/numa_balancing: 1",),
            )
        )
    if node.gpus and host.rdma_devices and host.memlock_bytes not in (None, -1):
        found.append(
            node_health(
                "host-memlock-limited",
                "warning",
                f"the locked-memory limit is {host.memlock_bytes} bytes on a host with RDMA devices "
                f"({', '.join(host.rdma_devices)}): RCCL's network transport cannot register its buffers",
                "raise it for the job: ulimit -l unlimited (in /etc/security/limits.conf: * - memlock unlimited; "
                "Slurm: PropagateResourceLimits; containers: --ulimit memlock=-1:-1)",
                (f"/proc/self/limits: Max locked memory {host.memlock_bytes}",),
            )
        )
    return found
