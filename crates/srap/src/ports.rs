//! The local side of port choice: which source ports the kernel would hand
//! out (`ip_local_port_range`), which it never hands out
//! (`ip_local_reserved_ports`), and which are taken by sockets right now
//! (`/proc/net/tcp`, `/proc/net/tcp6`, all states, so TIME-WAIT and LISTEN
//! ports are skipped too). Documented in the kernel's
//! Documentation/networking/ip-sysctl.rst.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::str::FromStr;

use rss::L4Proto;
use serde::{Deserialize, Serialize};

use crate::error::SrapError;

/// An inclusive range of ports, `low..=high`, never empty.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PortRange {
    pub low: u16,
    pub high: u16,
}

impl PortRange {
    /// The Linux default `ip_local_port_range`.
    pub const LINUX_DEFAULT: PortRange = PortRange {
        low: 32768,
        high: 60999,
    };

    pub fn new(low: u16, high: u16) -> Result<Self, SrapError> {
        if low == 0 || low > high {
            return Err(SrapError::BadPortRange(format!("{low}-{high}")));
        }
        Ok(PortRange { low, high })
    }

    /// Number of ports in the range (at least 1).
    pub fn len(&self) -> u32 {
        u32::from(self.high) - u32::from(self.low) + 1
    }

    /// Never true: a range holds at least one port.
    pub fn is_empty(&self) -> bool {
        false
    }

    pub fn contains(&self, port: u16) -> bool {
        (self.low..=self.high).contains(&port)
    }

    /// The `i`-th port after `start` (an offset into the range), wrapping.
    #[inline]
    pub fn nth_from(&self, start: u32, i: u32) -> u16 {
        let len = self.len();
        let off = (start % len + i % len) % len;
        (u32::from(self.low) + off) as u16
    }
}

impl fmt::Display for PortRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.low, self.high)
    }
}

impl FromStr for PortRange {
    type Err = SrapError;

    /// `LOW-HIGH`, or the kernel's `LOW<tab>HIGH`.
    fn from_str(text: &str) -> Result<Self, SrapError> {
        let bad = || SrapError::BadPortRange(text.trim().to_string());
        let mut parts = text.split(|c: char| c == '-' || c.is_whitespace());
        let mut next = || -> Result<u16, SrapError> {
            loop {
                match parts.next() {
                    Some("") => continue,
                    Some(p) => return p.parse().map_err(|_| bad()),
                    None => return Err(bad()),
                }
            }
        };
        let (low, high) = (next()?, next()?);
        if parts.any(|p| !p.is_empty()) {
            return Err(bad());
        }
        PortRange::new(low, high).map_err(|_| bad())
    }
}

/// A set of ports: one bit per port, 8 KiB, constant-time membership.
#[derive(Clone, PartialEq, Eq)]
pub struct PortSet {
    bits: Box<[u64; 1024]>,
}

impl Default for PortSet {
    fn default() -> Self {
        PortSet {
            bits: Box::new([0; 1024]),
        }
    }
}

impl fmt::Debug for PortSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set().entries(self.iter()).finish()
    }
}

impl PortSet {
    pub fn new() -> Self {
        Self::default()
    }

    #[inline]
    pub fn contains(&self, port: u16) -> bool {
        self.bits[usize::from(port >> 6)] & (1 << (port & 63)) != 0
    }

    pub fn insert(&mut self, port: u16) {
        self.bits[usize::from(port >> 6)] |= 1 << (port & 63);
    }

    pub fn remove(&mut self, port: u16) {
        self.bits[usize::from(port >> 6)] &= !(1 << (port & 63));
    }

    pub fn insert_range(&mut self, low: u16, high: u16) {
        for p in low..=high {
            self.insert(p);
        }
    }

    pub fn union_with(&mut self, other: &PortSet) {
        for (a, b) in self.bits.iter_mut().zip(other.bits.iter()) {
            *a |= b;
        }
    }

    pub fn len(&self) -> usize {
        self.bits.iter().map(|w| w.count_ones() as usize).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.bits.iter().all(|&w| w == 0)
    }

    pub fn iter(&self) -> impl Iterator<Item = u16> + '_ {
        (0..=u16::MAX).filter(|&p| self.contains(p))
    }

    /// Parses the kernel's list syntax (`ip_local_reserved_ports`):
    /// `8080,9000-9100`, possibly empty.
    pub fn parse_list(text: &str) -> Result<Self, SrapError> {
        let mut set = PortSet::new();
        let bad = || SrapError::BadPortList(text.trim().to_string());
        for item in text
            .trim()
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
        {
            match item.split_once('-') {
                Some((lo, hi)) => {
                    let lo: u16 = lo.trim().parse().map_err(|_| bad())?;
                    let hi: u16 = hi.trim().parse().map_err(|_| bad())?;
                    if lo > hi {
                        return Err(bad());
                    }
                    set.insert_range(lo, hi);
                }
                None => set.insert(item.parse().map_err(|_| bad())?),
            }
        }
        Ok(set)
    }
}

/// One socket line of `/proc/net/tcp*` or `/proc/net/udp*`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcSocket {
    pub local: SocketAddr,
    pub remote: SocketAddr,
    /// The kernel's state number (include/net/tcp_states.h): 1 ESTABLISHED,
    /// 6 TIME-WAIT, 10 LISTEN, ...
    pub state: u8,
}

/// Parses an address as `/proc/net/tcp` prints it: the `__be32` words as
/// host-order hex (`0100007F:1F90` is 127.0.0.1:8080 on little-endian).
fn parse_proc_addr(text: &str) -> Option<SocketAddr> {
    let (addr, port) = text.split_once(':')?;
    let port = u16::from_str_radix(port, 16).ok()?;
    let word = |i: usize| -> Option<[u8; 4]> {
        let w = u32::from_str_radix(addr.get(i * 8..i * 8 + 8)?, 16).ok()?;
        Some(w.to_ne_bytes())
    };
    let ip = match addr.len() {
        8 => IpAddr::V4(Ipv4Addr::from(word(0)?)),
        32 => {
            let mut bytes = [0u8; 16];
            for i in 0..4 {
                bytes[i * 4..i * 4 + 4].copy_from_slice(&word(i)?);
            }
            IpAddr::V6(Ipv6Addr::from(bytes))
        }
        _ => return None,
    };
    Some(SocketAddr::new(ip, port))
}

/// Parses the text of one `/proc/net/{tcp,tcp6,udp,udp6}` file.
pub fn parse_proc_net(path: &Path, text: &str) -> Result<Vec<ProcSocket>, SrapError> {
    let mut out = Vec::new();
    for line in text.lines().skip(1) {
        if line.trim().is_empty() {
            continue;
        }
        let bad = || SrapError::Parse {
            path: path.to_path_buf(),
            line: line.to_string(),
        };
        let mut cols = line.split_whitespace().skip(1);
        let local = cols.next().and_then(parse_proc_addr).ok_or_else(bad)?;
        let remote = cols.next().and_then(parse_proc_addr).ok_or_else(bad)?;
        let state = cols
            .next()
            .and_then(|s| u8::from_str_radix(s, 16).ok())
            .ok_or_else(bad)?;
        out.push(ProcSocket {
            local,
            remote,
            state,
        });
    }
    Ok(out)
}

fn read(path: &Path) -> Result<String, SrapError> {
    std::fs::read_to_string(path).map_err(|source| SrapError::Read {
        path: path.to_path_buf(),
        source,
    })
}

/// What the local host allows and uses, read once.
#[derive(Debug, Clone)]
pub struct LocalPorts {
    /// `net.ipv4.ip_local_port_range` (it also applies to IPv6).
    pub range: PortRange,
    /// `net.ipv4.ip_local_reserved_ports`.
    pub reserved: PortSet,
    /// Local ports of every socket of the protocol, in any state.
    pub in_use: PortSet,
    /// The sockets themselves.
    pub sockets: Vec<ProcSocket>,
}

/// Where the socket tables of `proc_root` are. On the real procfs that is
/// `/proc/thread-self/net`: `/proc/net` is `/proc/self/net`, the namespace
/// of the process's main thread, while a thread that entered another
/// network namespace (an allocator serving a lab host) must see its own
/// (proc(5)); `/proc/sys/net` always is the reading thread's. A fixture
/// root has `net/` itself.
fn net_dir(proc_root: &Path) -> PathBuf {
    if proc_root == Path::new("/proc") {
        proc_root.join("thread-self/net")
    } else {
        proc_root.join("net")
    }
}

impl LocalPorts {
    /// Reads `/proc` of this network namespace.
    pub fn read(proto: L4Proto) -> Result<Self, SrapError> {
        Self::read_from(Path::new("/proc"), proto)
    }

    /// Reads from another procfs root (tests use a directory of fixtures).
    pub fn read_from(proc_root: &Path, proto: L4Proto) -> Result<Self, SrapError> {
        let sys = proc_root.join("sys/net/ipv4");
        let range_path = sys.join("ip_local_port_range");
        let range: PortRange = read(&range_path)?.parse()?;
        let reserved_path = sys.join("ip_local_reserved_ports");
        let reserved = match std::fs::read_to_string(&reserved_path) {
            Ok(text) => PortSet::parse_list(&text)?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => PortSet::new(),
            Err(source) => {
                return Err(SrapError::Read {
                    path: reserved_path,
                    source,
                })
            }
        };
        let names: &[&str] = match proto {
            L4Proto::Udp => &["udp", "udp6"],
            _ => &["tcp", "tcp6"],
        };
        let mut sockets = Vec::new();
        for name in names {
            let path: PathBuf = net_dir(proc_root).join(name);
            match std::fs::read_to_string(&path) {
                Ok(text) => sockets.extend(parse_proc_net(&path, &text)?),
                // No IPv6 in this kernel or namespace.
                Err(e) if e.kind() == std::io::ErrorKind::NotFound && name.ends_with('6') => {}
                Err(source) => return Err(SrapError::Read { path, source }),
            }
        }
        let mut in_use = PortSet::new();
        for s in &sockets {
            in_use.insert(s.local.port());
        }
        Ok(LocalPorts {
            range,
            reserved,
            in_use,
            sockets,
        })
    }

    /// Ports a plan must not use: reserved or in use.
    pub fn excluded(&self) -> PortSet {
        let mut set = self.reserved.clone();
        set.union_with(&self.in_use);
        set
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn port_range_parses_kernel_and_user_forms() {
        assert_eq!(
            "32768\t60999\n".parse::<PortRange>().unwrap(),
            PortRange::LINUX_DEFAULT
        );
        assert_eq!(
            "40000-40010".parse::<PortRange>().unwrap(),
            PortRange::new(40000, 40010).unwrap()
        );
        for bad in ["", "5", "9-5", "0-10", "1-2-3", "a-b", "1-70000"] {
            assert!(bad.parse::<PortRange>().is_err(), "{bad}");
        }
    }

    #[test]
    fn nth_from_wraps() {
        let r = PortRange::new(10, 12).unwrap();
        let seen: Vec<u16> = (0..4).map(|i| r.nth_from(2, i)).collect();
        assert_eq!(seen, [12, 10, 11, 12]);
        let full = PortRange::new(1, 65535).unwrap();
        assert_eq!(full.nth_from(65534, 0), 65535);
        assert_eq!(full.nth_from(65534, 1), 1);
    }

    #[test]
    fn reserved_list_syntax() {
        let set = PortSet::parse_list("8080, 9000-9002,\n").unwrap();
        assert_eq!(set.iter().collect::<Vec<_>>(), [8080, 9000, 9001, 9002]);
        assert!(PortSet::parse_list("").unwrap().is_empty());
        assert!(PortSet::parse_list("9-5").is_err());
        assert!(PortSet::parse_list("http").is_err());
    }

    #[test]
    fn proc_net_lines() {
        let v4 = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1 1 0000000000000000 100 0 0 10 0\n   1: 0101A8C0:9C40 0201A8C0:1451 01 00000000:00000000 00:00000000 00000000     0        0 2 1\n";
        let p = Path::new("tcp");
        let socks = parse_proc_net(p, v4).unwrap();
        assert_eq!(socks.len(), 2);
        if cfg!(target_endian = "little") {
            assert_eq!(socks[0].local, "127.0.0.1:8080".parse().unwrap());
            assert_eq!(socks[1].local, "192.168.1.1:40000".parse().unwrap());
            assert_eq!(socks[1].remote, "192.168.1.2:5201".parse().unwrap());
        }
        assert_eq!(socks[0].state, 10);
        let v6 = "  sl  local_address                         remote_address                        st\n   0: 00000000000000000000000001000000:0016 00000000000000000000000000000000:0000 0A 0\n";
        let socks = parse_proc_net(Path::new("tcp6"), v6).unwrap();
        if cfg!(target_endian = "little") {
            assert_eq!(socks[0].local, "[::1]:22".parse().unwrap());
        }
        assert!(parse_proc_net(p, "header\n 0: garbage\n").is_err());
    }

    #[test]
    fn reads_this_host() {
        // /proc is always there on Linux; the sysctl files need no privilege.
        let local = LocalPorts::read(L4Proto::Tcp).unwrap();
        assert!(local.range.low <= local.range.high);
    }
}
