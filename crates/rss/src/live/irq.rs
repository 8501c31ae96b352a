//! Which IRQ serves which receive queue, from `/proc/interrupts`.
//!
//! Drivers name their queue interrupts after the device, the bus address, or
//! the virtio index, so each naming scheme is one rule of [`QueueNamer`]:
//!
//! | driver family | IRQ action name | rule |
//! |---|---|---|
//! | Intel (ixgbe, i40e, ice, igb), bnxt, ena, most others | `eth0-TxRx-3`, `eth0-rx-3`, `eth0-3` | `DEV-…-N`, not tx-only |
//! | mlx5 | `mlx5_comp3@pci:0000:3b:00.0` | completion vector N of the device's PCI address |
//! | virtio_net | `virtio2-input.3` | `/sys/class/net/DEV/device` -> `virtio2` |

use serde::Serialize;

/// One receive queue's interrupt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct QueueIrq {
    pub queue: u32,
    pub irq: u32,
    /// The IRQ action name from /proc/interrupts.
    pub name: String,
    /// `/proc/irq/N/smp_affinity_list`: the CPUs the IRQ may run on.
    pub cpus: Vec<u32>,
    /// `/proc/irq/N/effective_affinity_list`: the CPUs it does run on (the
    /// interrupt controller picks one of `cpus`); empty if the kernel does
    /// not expose it.
    pub effective_cpus: Vec<u32>,
}

impl QueueIrq {
    /// The CPU that serves this queue: the first effective CPU, else the
    /// first CPU of the affinity list.
    pub fn cpu(&self) -> Option<u32> {
        self.effective_cpus
            .first()
            .or_else(|| self.cpus.first())
            .copied()
    }
}

/// Recognises the IRQ action names of one device's receive queues.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueNamer {
    dev: String,
    /// `virtioN` when the device's parent is a virtio device.
    virtio: Option<String>,
    /// PCI address (`0000:3b:00.0`) when the device's parent is a PCI device.
    pci: Option<String>,
}

impl QueueNamer {
    /// `device_link` is the target of `/sys/class/net/DEV/device` (e.g.
    /// `../../../virtio2` or `../../../0000:3b:00.0`), if there is one.
    pub fn new(dev: &str, device_link: Option<&str>) -> Self {
        let parent = device_link
            .and_then(|l| l.trim_end_matches('/').rsplit('/').next())
            .filter(|p| !p.is_empty());
        let virtio = parent
            .filter(|p| {
                p.strip_prefix("virtio")
                    .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
            })
            .map(str::to_string);
        let pci = parent
            .filter(|p| p.len() >= 7 && p.matches(':').count() == 2 && p.contains('.'))
            .map(str::to_string);
        QueueNamer {
            dev: dev.to_string(),
            virtio,
            pci,
        }
    }

    /// The receive queue an IRQ action name belongs to, if it is one of this
    /// device's receive (or combined) queues.
    pub fn queue_of(&self, name: &str) -> Option<u32> {
        if let Some(virtio) = &self.virtio {
            if let Some(q) = name
                .strip_prefix(virtio.as_str())
                .and_then(|r| r.strip_prefix("-input."))
            {
                return q.parse().ok();
            }
        }
        if let Some(pci) = &self.pci {
            if let Some((vector, bus)) = name
                .strip_prefix("mlx5_comp")
                .and_then(|r| r.split_once("@pci:"))
            {
                if bus == pci {
                    return vector.parse().ok();
                }
            }
        }
        let rest = name.strip_prefix(self.dev.as_str())?.strip_prefix('-')?;
        let parts: Vec<&str> = rest.split(['-', '.', '_']).collect();
        let (last, middle) = parts.split_last()?;
        let queue = last.parse().ok()?;
        let middle = middle.join("-").to_ascii_lowercase();
        let tx_only = middle.contains("tx") && !middle.contains("rx");
        if tx_only {
            return None;
        }
        Some(queue)
    }
}

/// An IRQ found for a queue, before its affinity is read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FoundIrq {
    pub queue: u32,
    pub irq: u32,
    pub name: String,
}

/// Finds the device's receive-queue IRQs in the text of /proc/interrupts.
/// Lines look like `  38:  0  5737  PCI-MSIX-0000:00:03.0  1-edge  virtio2-input.0`;
/// shared lines list several actions separated by commas. One IRQ per queue
/// (the first found), sorted by queue.
pub fn find_queue_irqs(interrupts: &str, namer: &QueueNamer) -> Vec<FoundIrq> {
    let mut found: Vec<FoundIrq> = Vec::new();
    for line in interrupts.lines() {
        let mut tokens = line.split_whitespace();
        let Some(irq) = tokens
            .next()
            .and_then(|t| t.strip_suffix(':'))
            .and_then(|t| t.parse::<u32>().ok())
        else {
            continue;
        };
        for token in tokens.flat_map(|t| t.split(',')).filter(|t| !t.is_empty()) {
            if let Some(queue) = namer.queue_of(token) {
                if !found.iter().any(|f| f.queue == queue) {
                    found.push(FoundIrq {
                        queue,
                        irq,
                        name: token.to_string(),
                    });
                }
                break;
            }
        }
    }
    found.sort_by_key(|f| f.queue);
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    const VIRTIO: &str = "           CPU0       CPU1
 37:          0          0 PCI-MSIX-0000:00:03.0   0-edge      virtio2-config
 38:          0       5737 PCI-MSIX-0000:00:03.0   1-edge      virtio2-input.0
 39:       4375          0 PCI-MSIX-0000:00:03.0   2-edge      virtio2-output.0
 41:       1373          0 PCI-MSIX-0000:00:04.0   1-edge      virtio3-rx
 34:         19          0 PCI-MSIX-0000:00:05.0   1-edge      virtio4-input
NMI:          0          0   Non-maskable interrupts
";

    #[test]
    fn virtio_input_queues() {
        let namer = QueueNamer::new("eth0", Some("../../../virtio2"));
        assert_eq!(
            find_queue_irqs(VIRTIO, &namer),
            vec![FoundIrq {
                queue: 0,
                irq: 38,
                name: "virtio2-input.0".into()
            }]
        );
        // Another virtio device's queues are not ours.
        let namer = QueueNamer::new("eth1", Some("../../../virtio7"));
        assert!(find_queue_irqs(VIRTIO, &namer).is_empty());
    }

    #[test]
    fn intel_txrx_and_tx_only() {
        let text = " 120:  1  0  IR-PCI-MSI 524289-edge  eth0-TxRx-0
 121:  1  0  IR-PCI-MSI 524290-edge  eth0-TxRx-1
 122:  0  0  IR-PCI-MSI 524291-edge  eth0-tx-2
 123:  0  0  IR-PCI-MSI 524292-edge  eth0-rx-2
 124:  0  0  IR-PCI-MSI 524293-edge  eth0
 125:  0  0  IR-PCI-MSI 524294-edge  eth01-TxRx-7
";
        let namer = QueueNamer::new("eth0", Some("../../../0000:01:00.0"));
        let found = find_queue_irqs(text, &namer);
        let pairs: Vec<(u32, u32)> = found.iter().map(|f| (f.queue, f.irq)).collect();
        assert_eq!(pairs, vec![(0, 120), (1, 121), (2, 123)]);
    }

    #[test]
    fn mlx5_completion_vectors_by_pci_address() {
        let text = " 90:  0 0 IR-PCI-MSIX-0000:3b:00.0 0-edge  mlx5_async0@pci:0000:3b:00.0
 91:  9 0 IR-PCI-MSIX-0000:3b:00.0 1-edge  mlx5_comp0@pci:0000:3b:00.0
 92:  9 0 IR-PCI-MSIX-0000:3b:00.0 2-edge  mlx5_comp1@pci:0000:3b:00.0
 93:  9 0 IR-PCI-MSIX-0000:3b:00.1 1-edge  mlx5_comp0@pci:0000:3b:00.1
";
        let namer = QueueNamer::new("ens1f0np0", Some("../../../0000:3b:00.0"));
        let pairs: Vec<(u32, u32)> = find_queue_irqs(text, &namer)
            .iter()
            .map(|f| (f.queue, f.irq))
            .collect();
        assert_eq!(pairs, vec![(0, 91), (1, 92)]);
    }

    #[test]
    fn shared_lines_and_garbage() {
        let text = "garbage\n 17: 0 IO-APIC 17-fasteoi ehci_hcd:usb1, eth0-rx-0\n:\n 18:\n";
        let namer = QueueNamer::new("eth0", None);
        let found = find_queue_irqs(text, &namer);
        assert_eq!(found.len(), 1);
        assert_eq!((found[0].queue, found[0].irq), (0, 17));
    }

    #[test]
    fn effective_cpu_wins() {
        let irq = QueueIrq {
            queue: 0,
            irq: 38,
            name: "virtio2-input.0".into(),
            cpus: vec![0, 1],
            effective_cpus: vec![1],
        };
        assert_eq!(irq.cpu(), Some(1));
        let irq = QueueIrq {
            effective_cpus: vec![],
            ..irq
        };
        assert_eq!(irq.cpu(), Some(0));
    }
}
