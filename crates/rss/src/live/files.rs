//! Reading /proc and /sys, with injectable roots so the parsers are tested on
//! literal file contents (see the tests, which build a fake tree in a
//! temporary directory).

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use super::error::LiveError;

/// Where /proc and /sys are. [`Roots::default`] is the real system.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Roots {
    pub proc: PathBuf,
    pub sys: PathBuf,
}

impl Default for Roots {
    fn default() -> Self {
        Roots {
            proc: PathBuf::from("/proc"),
            sys: PathBuf::from("/sys"),
        }
    }
}

impl Roots {
    /// Both roots under one directory (`DIR/proc`, `DIR/sys`), for tests.
    pub fn under(dir: &Path) -> Self {
        Roots {
            proc: dir.join("proc"),
            sys: dir.join("sys"),
        }
    }

    fn read(&self, path: PathBuf) -> Result<Option<String>, LiveError> {
        match fs::read_to_string(&path) {
            Ok(text) => Ok(Some(text)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(source) => Err(LiveError::Read { path, source }),
        }
    }

    /// The file at `path` parsed by `parse` (None if absent); a parse
    /// failure names the file.
    fn read_parsed<T>(
        &self,
        path: PathBuf,
        parse: impl FnOnce(&str) -> Result<T, String>,
    ) -> Result<Option<T>, LiveError> {
        match self.read(path.clone())? {
            None => Ok(None),
            Some(text) => parse(&text)
                .map(Some)
                .map_err(|reason| LiveError::Parse { path, reason }),
        }
    }

    fn net_dev(&self, dev: &str) -> PathBuf {
        self.sys.join("class/net").join(dev)
    }

    /// `/proc/interrupts` (empty if absent).
    pub fn interrupts(&self) -> Result<String, LiveError> {
        Ok(self.read(self.proc.join("interrupts"))?.unwrap_or_default())
    }

    /// `/proc/irq/N/smp_affinity_list` and `effective_affinity_list`
    /// (each empty when the file is absent).
    pub fn irq_affinity(&self, irq: u32) -> Result<(Vec<u32>, Vec<u32>), LiveError> {
        let dir = self.proc.join("irq").join(irq.to_string());
        let list = |name: &str| -> Result<Vec<u32>, LiveError> {
            Ok(self
                .read_parsed(dir.join(name), parse_cpu_list)?
                .unwrap_or_default())
        };
        Ok((list("smp_affinity_list")?, list("effective_affinity_list")?))
    }

    /// `/sys/class/net/DEV/ifindex` (None when sysfs has no such device).
    pub fn sysfs_ifindex(&self, dev: &str) -> Option<u32> {
        let text = fs::read_to_string(self.net_dev(dev).join("ifindex")).ok()?;
        text.trim().parse().ok()
    }

    /// Target of `/sys/class/net/DEV/device` (None for virtual devices).
    pub fn device_link(&self, dev: &str) -> Option<String> {
        fs::read_link(self.net_dev(dev).join("device"))
            .ok()
            .map(|p| p.to_string_lossy().into_owned())
    }

    /// Driver name from `/sys/class/net/DEV/device/driver`.
    pub fn driver(&self, dev: &str) -> Option<String> {
        let link = fs::read_link(self.net_dev(dev).join("device/driver")).ok()?;
        link.file_name().map(|n| n.to_string_lossy().into_owned())
    }

    /// RPS CPUs of each receive queue, from
    /// `/sys/class/net/DEV/queues/rx-N/rps_cpus`, indexed by N. Empty when the
    /// device has no queue directories.
    pub fn rps_cpus(&self, dev: &str) -> Result<Vec<Vec<u32>>, LiveError> {
        let dir = self.net_dev(dev).join("queues");
        let entries = match fs::read_dir(&dir) {
            Ok(e) => e,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(source) => return Err(LiveError::Read { path: dir, source }),
        };
        let mut queues: Vec<u32> = entries
            .filter_map(Result::ok)
            .filter_map(|e| e.file_name().to_str()?.strip_prefix("rx-")?.parse().ok())
            .collect();
        queues.sort_unstable();
        let count = queues.last().map_or(0, |q| *q as usize + 1);
        let mut out = vec![Vec::new(); count];
        for q in queues {
            if let Some(cpus) =
                self.read_parsed(dir.join(format!("rx-{q}/rps_cpus")), parse_cpu_mask)?
            {
                out[q as usize] = cpus;
            }
        }
        Ok(out)
    }

    /// `/proc/sys/net/core/netdev_rss_key` as bytes (None if absent).
    pub fn netdev_rss_key(&self) -> Result<Option<Vec<u8>>, LiveError> {
        self.read_parsed(
            self.proc.join("sys/net/core/netdev_rss_key"),
            parse_colon_hex,
        )
    }

    /// Online CPUs from `/sys/devices/system/cpu/online`.
    pub fn online_cpus(&self) -> Result<Option<Vec<u32>>, LiveError> {
        self.read_parsed(self.sys.join("devices/system/cpu/online"), parse_cpu_list)
    }
}

/// Largest CPU number accepted (a sanity bound: the kernel's NR_CPUS limit is
/// 8192 on common configs).
const MAX_CPU: u32 = 1 << 16;

/// Parses a CPU list such as `0-3,8,10-11` (empty text: no CPUs).
pub fn parse_cpu_list(text: &str) -> Result<Vec<u32>, String> {
    let mut cpus = Vec::new();
    for part in text
        .trim()
        .split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
    {
        let num = |s: &str| -> Result<u32, String> {
            let n: u32 = s
                .trim()
                .parse()
                .map_err(|_| format!("'{s}' is not a CPU number"))?;
            if n > MAX_CPU {
                return Err(format!("CPU {n} is out of range"));
            }
            Ok(n)
        };
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b) = (num(a)?, num(b)?);
                if a > b {
                    return Err(format!("range {part} is reversed"));
                }
                cpus.extend(a..=b);
            }
            None => cpus.push(num(part)?),
        }
    }
    cpus.sort_unstable();
    cpus.dedup();
    Ok(cpus)
}

/// Parses a CPU bitmask such as `00000000,00000003` (32-bit hex groups, most
/// significant first; `rps_cpus`, `smp_affinity`).
pub fn parse_cpu_mask(text: &str) -> Result<Vec<u32>, String> {
    let groups: Vec<&str> = text.trim().split(',').collect();
    if groups.len() as u32 > MAX_CPU / 32 {
        return Err(format!("{} mask groups is too many", groups.len()));
    }
    let mut cpus = Vec::new();
    for (i, group) in groups.iter().rev().enumerate() {
        if group.is_empty() || group.len() > 8 {
            return Err(format!("'{group}' is not a 32-bit hex group"));
        }
        let bits = u32::from_str_radix(group, 16).map_err(|_| format!("'{group}' is not hex"))?;
        for bit in 0..32 {
            if bits & (1 << bit) != 0 {
                cpus.push(i as u32 * 32 + bit);
            }
        }
    }
    cpus.sort_unstable();
    Ok(cpus)
}

/// A CPU set in the form sysfs cpumask files take (`rps_cpus`): hex, in
/// comma-separated 32-bit groups, most significant first ("0" for none);
/// what [`parse_cpu_mask`] reads.
pub fn format_cpu_mask(cpus: &[u32]) -> String {
    let groups = cpus.iter().map(|&c| c / 32 + 1).max().unwrap_or(1) as usize;
    let mut words = vec![0u32; groups];
    for &c in cpus {
        words[(c / 32) as usize] |= 1 << (c % 32);
    }
    let mut text: Vec<String> = words.iter().rev().map(|w| format!("{w:08x}")).collect();
    // The leading group without padding, as the kernel prints it.
    text[0] = format!("{:x}", words[groups - 1]);
    text.join(",")
}

/// Parses `6d:5a:56:...` into bytes.
pub fn parse_colon_hex(text: &str) -> Result<Vec<u8>, String> {
    text.trim()
        .split(':')
        .map(|b| u8::from_str_radix(b, 16).map_err(|_| format!("'{b}' is not a hex byte")))
        .collect()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn cpu_lists() {
        assert_eq!(
            parse_cpu_list("0-3,8,10-11\n").unwrap(),
            vec![0, 1, 2, 3, 8, 10, 11]
        );
        assert_eq!(parse_cpu_list("1").unwrap(), vec![1]);
        assert_eq!(parse_cpu_list("\n").unwrap(), Vec::<u32>::new());
        assert!(parse_cpu_list("3-1").is_err());
        assert!(parse_cpu_list("a").is_err());
        assert!(parse_cpu_list("0-4294967295").is_err());
    }

    #[test]
    fn cpu_masks() {
        assert_eq!(parse_cpu_mask("0\n").unwrap(), Vec::<u32>::new());
        assert_eq!(parse_cpu_mask("3").unwrap(), vec![0, 1]);
        assert_eq!(parse_cpu_mask("00000001,80000000").unwrap(), vec![31, 32]);
        assert_eq!(
            parse_cpu_mask("f0,00000000,00000000").unwrap(),
            vec![68, 69, 70, 71]
        );
        assert!(parse_cpu_mask("xyz").is_err());
        assert!(parse_cpu_mask("1,,2").is_err());
        assert!(parse_cpu_mask("123456789").is_err());
    }

    #[test]
    fn colon_hex() {
        assert_eq!(parse_colon_hex("6d:5a:00\n").unwrap(), vec![0x6d, 0x5a, 0]);
        assert!(parse_colon_hex("6d::5a").is_err());
    }

    #[test]
    fn cpu_masks_as_sysfs_reads_them() {
        assert_eq!(format_cpu_mask(&[0, 1]), "3");
        assert_eq!(format_cpu_mask(&[]), "0");
        assert_eq!(format_cpu_mask(&[1]), "2");
        assert_eq!(format_cpu_mask(&[0, 33]), "2,00000001");
    }
    proptest! {
        #[test]
        fn a_formatted_mask_parses_back(cpus in proptest::collection::vec(0u32..256, 0..20)) {
            let mut want = cpus.clone();
            want.sort_unstable();
            want.dedup();
            prop_assert_eq!(parse_cpu_mask(&format_cpu_mask(&cpus)).unwrap(), want);
        }
        #[test]
        fn parsers_never_panic(s in ".{0,64}") {
            let _ = parse_cpu_list(&s);
            let _ = parse_cpu_mask(&s);
            let _ = parse_colon_hex(&s);
        }
    }

    /// A fake /proc and /sys with literal contents.
    /// A scratch directory laid out like `/` (proc/, sys/).
    pub(crate) struct FakeTree {
        dir: testkit::TempDir,
    }

    impl FakeTree {
        pub fn new(tag: &str) -> Self {
            FakeTree {
                dir: testkit::TempDir::new(&format!("steer-live-{tag}")),
            }
        }
        pub fn write(&self, rel: &str, text: &str) {
            let p = self.dir.join(rel);
            fs::create_dir_all(p.parent().unwrap()).unwrap();
            fs::write(p, text).unwrap();
        }
        pub fn link(&self, rel: &str, target: &str) {
            let p = self.dir.join(rel);
            fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::os::unix::fs::symlink(target, p).unwrap();
        }
        pub fn roots(&self) -> Roots {
            Roots::under(self.dir.path())
        }
    }

    #[test]
    fn reads_a_fake_tree() {
        let t = FakeTree::new("files");
        t.write("proc/irq/38/smp_affinity_list", "0-1\n");
        t.write("proc/irq/38/effective_affinity_list", "1\n");
        t.write("proc/sys/net/core/netdev_rss_key", "01:02:ff\n");
        t.write("sys/class/net/eth0/queues/rx-0/rps_cpus", "0\n");
        t.write(
            "sys/class/net/eth0/queues/rx-1/rps_cpus",
            "00000000,0000000c\n",
        );
        t.write("sys/class/net/eth0/queues/tx-0/xps_cpus", "1\n");
        t.write("sys/devices/system/cpu/online", "0-3\n");
        t.link("sys/class/net/eth0/device", "../../../virtio2");
        t.write("sys/class/net/eth0/ifindex", "4\n");
        let r = t.roots();
        assert_eq!(r.irq_affinity(38).unwrap(), (vec![0, 1], vec![1]));
        assert_eq!(r.irq_affinity(39).unwrap(), (vec![], vec![]));
        assert_eq!(r.netdev_rss_key().unwrap(), Some(vec![1, 2, 0xff]));
        assert_eq!(r.rps_cpus("eth0").unwrap(), vec![vec![], vec![2, 3]]);
        assert_eq!(r.rps_cpus("eth9").unwrap(), Vec::<Vec<u32>>::new());
        assert_eq!(r.online_cpus().unwrap(), Some(vec![0, 1, 2, 3]));
        assert_eq!(r.device_link("eth0").as_deref(), Some("../../../virtio2"));
        assert_eq!(r.interrupts().unwrap(), "");
        assert_eq!(r.sysfs_ifindex("eth0"), Some(4));
        assert_eq!(r.sysfs_ifindex("eth9"), None);
        t.write("proc/irq/40/smp_affinity_list", "zz\n");
        assert!(matches!(r.irq_affinity(40), Err(LiveError::Parse { .. })));
    }
}
