#!/usr/bin/env python3
"""Writes the synthetic hwloc XML topologies that the grouping tests read.

The shapes follow the public descriptions of the instances (GPUs and EFA NICs
per PCIe switch, switches per socket); bus numbers are invented. Run it from
anywhere: the files land beside this script. The generated files are
committed, so the build never runs this.

  p5.xml          2 sockets, 8 GPUs, 32 NICs: one switch per GPU with 4 NICs
  p4d.xml         2 sockets, 8 GPUs, 4 NICs: one switch per 2 GPUs and 1 NIC
  single.xml      1 GPU and 1 NIC on separate root ports of one socket
  cross-numa.xml  2 GPUs on socket 0, 2 NICs on socket 1
  shared-switch.xml  2 GPUs and 8 NICs behind one switch
  no-gpu.xml      2 NICs, no GPU (a CI host)
  mixed.xml       socket 0: GPU 0 + NIC 0 behind a switch, GPU 1 and NIC 1 on
                  root ports; socket 1: GPU 2 and no NIC
"""
import os

CORES_PER_PACKAGE = 4

GPU_H100 = "0302 [10de:2330] [10de:16c1] a1"
GPU_A100 = "0302 [10de:20b0] [10de:134f] a1"
GPU_VGA_CLASS = "0300 [10de:2236] [10de:1482] a1"      # NVIDIA GPU that reports class VGA
GPU_OTHER_CLASS = "0380 [10de:20b5] [10de:1533] a1"    # only its CUDA OS device says GPU
EFA_GEN2 = "0200 [1d0f:efa1] [1d0f:efa1] 00"
EFA_GEN1 = "0200 [1d0f:efa0] [1d0f:efa0] 00"
NVSWITCH = "0680 [10de:22a3] [10de:1796] a1"            # NVIDIA, but not a GPU
BMC_VGA = "0300 [1a03:2000] [1a03:2000] 52"             # VGA, but not NVIDIA
SWITCH_PORT = "0604 [1000:c010] [1000:a064] b0"
ROOT_PORT = "0604 [1022:14ab] [0000:0000] 00"


class Writer:
    def __init__(self):
        self.lines = []
        self.indent = 1

    def open(self, attrs):
        self.lines.append("  " * self.indent + "<object " + attrs + ">")
        self.indent += 1

    def close(self):
        self.indent -= 1
        self.lines.append("  " * self.indent + "</object>")

    def leaf(self, attrs):
        self.lines.append("  " * self.indent + "<object " + attrs + "/>")


def mask(bits):
    return "0x%08x" % sum(1 << b for b in bits)


class Machine:
    """A machine of N packages, one NUMA node each; I/O hangs under packages."""

    def __init__(self, packages):
        self.packages = packages
        self.w = Writer()
        self.io = {p: [] for p in range(packages)}

    def add_hostbridge(self, package, bus, build):
        """build(tree, bus) fills the host bridge and returns the last bus used."""
        self.io[package].append((bus, build))

    def render(self):
        w = self.w
        allcpus = mask(range(self.packages * CORES_PER_PACKAGE))
        allnodes = mask(range(self.packages))
        w.open('type="Machine" os_index="0" cpuset="%s" complete_cpuset="%s" allowed_cpuset="%s" '
               'nodeset="%s" complete_nodeset="%s" allowed_nodeset="%s"'
               % (allcpus, allcpus, allcpus, allnodes, allnodes, allnodes))
        for p in range(self.packages):
            cpus = mask(range(p * CORES_PER_PACKAGE, (p + 1) * CORES_PER_PACKAGE))
            node = mask([p])
            sets = 'cpuset="%s" complete_cpuset="%s" nodeset="%s" complete_nodeset="%s"' % (cpus, cpus, node, node)
            w.open('type="Package" os_index="%d" %s' % (p, sets))
            w.leaf('type="NUMANode" os_index="%d" %s local_memory="1099511627776"' % (p, sets))
            for c in range(p * CORES_PER_PACKAGE, (p + 1) * CORES_PER_PACKAGE):
                one = mask([c])
                csets = 'cpuset="%s" complete_cpuset="%s" nodeset="%s" complete_nodeset="%s"' % (one, one, node, node)
                w.open('type="Core" os_index="%d" %s' % (c, csets))
                w.leaf('type="PU" os_index="%d" %s' % (c, csets))
                w.close()
            for bus, build in self.io[p]:
                tree = PciTree(w)
                last = build(tree, bus)
                tree.render_hostbridge(bus, last)
            w.close()
        w.close()
        head = ['<?xml version="1.0" encoding="UTF-8"?>', '<!DOCTYPE topology SYSTEM "hwloc2.dtd">',
                '<topology version="2.0">']
        return "\n".join(head + w.lines + ["</topology>", ""])


class PciTree:
    """Collects a host bridge's subtree as nested (kind, busid, type, children)."""

    def __init__(self, w):
        self.w = w
        self.children = []

    def render_hostbridge(self, bus, last):
        self.w.open('type="Bridge" bridge_type="0-1" depth="0" bridge_pci="0000:[%02x-%02x]"' % (bus, last))
        for c in self.children:
            self.render(c, 1)
        self.w.close()

    def render(self, node, depth):
        kind, busid, pcitype, extra, children = node
        if kind == "bridge":
            sec, sub = extra
            self.w.open('type="Bridge" bridge_type="1-1" depth="%d" bridge_pci="0000:[%02x-%02x]" '
                        'pci_busid="%s" pci_type="%s" pci_link_speed="32.000000"'
                        % (depth, sec, sub, busid, pcitype))
            for c in children:
                self.render(c, depth + 1)
            self.w.close()
        else:
            attrs = 'type="PCIDev" pci_busid="%s" pci_type="%s" pci_link_speed="32.000000"' % (busid, pcitype)
            if extra:
                self.w.open(attrs)
                self.w.leaf(extra)
                self.w.close()
            else:
                self.w.leaf(attrs)


def busid(bus, dev=0, fn=0):
    return "0000:%02x:%02x.%x" % (bus, dev, fn)


def switch_under_root_port(devices):
    """A root port, a switch behind it, one downstream port per device.

    devices: list of (pci_type, osdev_xml or None). Returns build(tree, bus)."""

    def build(tree, bus):
        rp_sec = bus + 1          # switch upstream port lives here
        sw_sec = bus + 2          # downstream ports live here
        ports = []
        for i, (pcitype, osdev) in enumerate(devices):
            dev_bus = bus + 3 + i
            ports.append(("bridge", busid(sw_sec, i), SWITCH_PORT, (dev_bus, dev_bus),
                          [("dev", busid(dev_bus), pcitype, osdev, [])]))
        last = bus + 2 + len(devices)
        upstream = ("bridge", busid(rp_sec), SWITCH_PORT, (sw_sec, last), ports)
        tree.children.append(("bridge", busid(bus, 1), ROOT_PORT, (rp_sec, last), [upstream]))
        return last

    return build


def root_ports(devices):
    """Each device on its own root port of one host bridge (no switch)."""

    def build(tree, bus):
        for i, (pcitype, osdev) in enumerate(devices):
            dev_bus = bus + 1 + i
            tree.children.append(("bridge", busid(bus, 1 + i), ROOT_PORT, (dev_bus, dev_bus),
                                  [("dev", busid(dev_bus), pcitype, osdev, [])]))
        return bus + len(devices)

    return build


def cuda_osdev(index):
    return 'type="OSDev" name="cuda%d" osdev_type="5"' % index


def p5():
    m = Machine(2)
    m.add_hostbridge(0, 0x00, root_ports([(BMC_VGA, None)]))
    for s in range(8):
        devices = [(GPU_H100, None)] + [(EFA_GEN2, None)] * 4
        if s == 0:
            devices.append((NVSWITCH, None))
        m.add_hostbridge(s // 4, 0x10 + 0x1c * s, switch_under_root_port(devices))
    return m


def p4d():
    m = Machine(2)
    for s in range(4):
        devices = [(GPU_A100, None), (GPU_A100, None), (EFA_GEN1, None)]
        m.add_hostbridge(s // 2, 0x10 + 0x20 * s, switch_under_root_port(devices))
    m.add_hostbridge(1, 0xe0, root_ports([(NVSWITCH, None)] * 2))
    return m


def single():
    m = Machine(1)
    m.add_hostbridge(0, 0x00, root_ports([(GPU_H100, None)]))
    m.add_hostbridge(0, 0x40, root_ports([(EFA_GEN2, None)]))
    return m


def cross_numa():
    m = Machine(2)
    m.add_hostbridge(0, 0x00, root_ports([(GPU_VGA_CLASS, None), (GPU_OTHER_CLASS, cuda_osdev(1))]))
    m.add_hostbridge(1, 0x80, root_ports([(EFA_GEN2, None), (EFA_GEN2, None)]))
    return m


def shared_switch():
    m = Machine(1)
    devices = [(GPU_H100, None)] * 2 + [(EFA_GEN2, None)] * 8
    m.add_hostbridge(0, 0x20, switch_under_root_port(devices))
    return m


def no_gpu():
    m = Machine(1)
    m.add_hostbridge(0, 0x00, root_ports([(BMC_VGA, None), (EFA_GEN2, None), (EFA_GEN2, None)]))
    return m


def mixed():
    m = Machine(2)
    m.add_hostbridge(0, 0x10, switch_under_root_port([(GPU_H100, None), (EFA_GEN2, None)]))
    m.add_hostbridge(0, 0x30, root_ports([(GPU_H100, None), (EFA_GEN2, None)]))
    m.add_hostbridge(1, 0x90, root_ports([(GPU_H100, None)]))
    return m


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    for name, build in [("p5", p5), ("p4d", p4d), ("single", single), ("cross-numa", cross_numa),
                        ("shared-switch", shared_switch), ("no-gpu", no_gpu),
                        ("mixed", mixed)]:
        with open(os.path.join(here, name + ".xml"), "w") as f:
            f.write(build().render())


if __name__ == "__main__":
    main()
