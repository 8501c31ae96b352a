//! The verification vectors of Microsoft's "Verifying the RSS Hash Calculation"
//! (RSS specification), every IPv4 and IPv6 row, with and without ports, checked
//! through the same path `steer rss where` uses, and through every Toeplitz
//! implementation forced one by one (`ToeplitzPath`), so a host that runs
//! only the table path (AVX2 without GFNI/AVX-512, or not x86 at all) is
//! checked by the same vectors as one that runs GFNI.

use std::net::IpAddr;

use rss::{FlowTuple, L4Proto, Predictor, RssConfig, RssKey, ToeplitzPath, ToeplitzTable};

/// (source, source port, destination, destination port, 2-tuple hash, 4-tuple hash)
const IPV4: &[(&str, u16, &str, u16, u32, u32)] = &[
    (
        "66.9.149.187",
        2794,
        "161.142.100.80",
        1766,
        0x323e8fc2,
        0x51ccc178,
    ),
    (
        "199.92.111.2",
        14230,
        "65.69.140.83",
        4739,
        0xd718262a,
        0xc626b0ea,
    ),
    (
        "24.19.198.95",
        12898,
        "12.22.207.184",
        38024,
        0xd2d0a5de,
        0x5c2b394a,
    ),
    (
        "38.27.205.30",
        48228,
        "209.142.163.6",
        2217,
        0x82989176,
        0xafc7327f,
    ),
    (
        "153.39.163.191",
        44251,
        "202.188.127.2",
        1303,
        0x5d1809c5,
        0x10e828a2,
    ),
];

const IPV6: &[(&str, u16, &str, u16, u32, u32)] = &[
    (
        "3ffe:2501:200:1fff::7",
        2794,
        "3ffe:2501:200:3::1",
        1766,
        0x2cc18cd5,
        0x40207d3d,
    ),
    (
        "3ffe:501:8::260:97ff:fe40:efab",
        14230,
        "ff02::1",
        4739,
        0x0f0c461c,
        0xdde51bbf,
    ),
    (
        "3ffe:1900:4545:3:200:f8ff:fe21:67cf",
        44251,
        "fe80::200:f8ff:fe21:67cf",
        38024,
        0x4b61e985,
        0x02d1feef,
    ),
];

fn check(rows: &[(&str, u16, &str, u16, u32, u32)]) {
    let config = RssConfig::ethtool_default(RssKey::microsoft(), 1, 128).unwrap();
    let predictor = Predictor::new(config.clone()).unwrap();
    for &(src, sport, dst, dport, two, four) in rows {
        let (s, d) = (src.parse().unwrap(), dst.parse().unwrap());
        let tcp = FlowTuple::new(s, sport, d, dport, L4Proto::Tcp);
        let ip = FlowTuple::new(s, sport, d, dport, L4Proto::Other);
        assert_eq!(
            config.hash(&tcp).unwrap(),
            four,
            "{src}:{sport} -> {dst}:{dport}"
        );
        assert_eq!(config.hash(&ip).unwrap(), two, "{src} -> {dst}");
        assert_eq!(predictor.place(&tcp).unwrap().hash, four);
        assert_eq!(predictor.place(&ip).unwrap().hash, two);
    }
}

#[test]
fn ipv4_rows() {
    check(IPV4);
}

#[test]
fn ipv6_rows() {
    check(IPV6);
}

/// The bytes Toeplitz hashes for a row: addresses, then (4-tuple) ports,
/// network order.
fn input(src: &str, sport: u16, dst: &str, dport: u16, ports: bool) -> Vec<u8> {
    let octets = |a: &str| match a.parse::<IpAddr>().unwrap() {
        IpAddr::V4(a) => a.octets().to_vec(),
        IpAddr::V6(a) => a.octets().to_vec(),
    };
    let mut v = octets(src);
    v.extend(octets(dst));
    if ports {
        v.extend(sport.to_be_bytes());
        v.extend(dport.to_be_bytes());
    }
    v
}

/// Every row through `table`'s `hash`, fixed-size and batch entry points
/// (batches of odd lengths, so every SIMD tail is taken).
fn check_table(table: &ToeplitzTable) {
    let path = table.path();
    let mut v4 = Vec::new();
    let mut v6 = Vec::new();
    for &(src, sport, dst, dport, two, four) in IPV4.iter().chain(IPV6) {
        let (i2, i4) = (
            input(src, sport, dst, dport, false),
            input(src, sport, dst, dport, true),
        );
        assert_eq!(table.hash(&i2).unwrap(), two, "{path}: {src} -> {dst}");
        assert_eq!(
            table.hash(&i4).unwrap(),
            four,
            "{path}: {src}:{sport} -> {dst}:{dport}"
        );
        match <[u8; 12]>::try_from(i4.as_slice()) {
            Ok(t) => {
                assert_eq!(table.hash_v4_4tuple(&t), four, "{path}: {src}:{sport}");
                v4.push((t, four));
            }
            Err(_) => {
                let t: [u8; 36] = i4.as_slice().try_into().unwrap();
                assert_eq!(table.hash_v6_4tuple(&t), four, "{path}: {src}:{sport}");
                v6.push((t, four));
            }
        }
    }
    for n in 0..=3 * v4.len() {
        let rows: Vec<_> = v4.iter().cycle().take(n).collect();
        let inputs: Vec<[u8; 12]> = rows.iter().map(|r| r.0).collect();
        let mut out = vec![0; n];
        table.hash_batch_v4(&inputs, &mut out);
        assert_eq!(
            out,
            rows.iter().map(|r| r.1).collect::<Vec<_>>(),
            "{path}: batch of {n}"
        );
    }
    for n in 0..=3 * v6.len() {
        let rows: Vec<_> = v6.iter().cycle().take(n).collect();
        let inputs: Vec<[u8; 36]> = rows.iter().map(|r| r.0).collect();
        let mut out = vec![0; n];
        table.hash_batch_v6(&inputs, &mut out);
        assert_eq!(
            out,
            rows.iter().map(|r| r.1).collect::<Vec<_>>(),
            "{path}: batch of {n}"
        );
    }
}

/// Each path forced: one this CPU runs gives every vector; one it cannot run
/// is refused, naming exactly the features it lacks. The table path runs
/// everywhere. Every path the CPU has must have run; a path it lacks is
/// named in the output under strict mode (CI, `make test`), so a run on a
/// CPU without GFNI or AVX-512 says it did not test those paths (issue 27,
/// "Tests that pass without their prerequisite").
#[test]
fn every_toeplitz_path_gives_the_vectors() {
    let key = RssKey::microsoft();
    let mut ran = Vec::new();
    let mut lacking = Vec::new();
    for path in ToeplitzPath::ALL {
        match ToeplitzTable::with_path(&key, path) {
            Ok(table) => {
                assert_eq!(table.path(), path);
                assert!(
                    path.missing().is_empty(),
                    "{path} ran without {:?}",
                    path.missing()
                );
                check_table(&table);
                ran.push(path);
            }
            Err(e) => {
                assert_eq!(e.path, path);
                assert!(!e.missing.is_empty(), "{path} refused with nothing missing");
                assert_eq!(e.missing, path.missing());
                assert!(e.is_environment());
                lacking.push(format!("{path} (the CPU lacks {})", e.missing.join(", ")));
            }
        }
    }
    for path in ToeplitzPath::ALL {
        assert!(
            !path.missing().is_empty() || ran.contains(&path),
            "{path} can run on this CPU but was not exercised"
        );
    }
    if testkit::strict() && !lacking.is_empty() {
        // Straight to the process's stderr: the harness captures eprintln!
        // of a passing test, and this is for the log of a passing run.
        use std::io::Write;
        let _ = writeln!(
            std::io::stderr(),
            "every_toeplitz_path_gives_the_vectors: not tested on this CPU: {}",
            lacking.join("; ")
        );
    }
    assert!(ran.contains(&ToeplitzPath::Table));
    let best = ToeplitzTable::new(&key);
    assert_eq!(best.path(), ToeplitzPath::detect());
    assert_eq!(
        ran[0],
        best.path(),
        "the default is the fastest path that runs"
    );
}

/// The dispatch decision on CPUs this host may not be: what each runs.
#[test]
fn dispatch_picks_per_cpu() {
    let cpu = |features: &'static [&'static str]| move |f: &str| features.contains(&f);
    // AMD Zen 2/3 EPYC: AVX2, no GFNI, no AVX-512.
    let avx2_only = cpu(&["sse4.2", "avx", "avx2", "pclmulqdq"]);
    assert_eq!(ToeplitzPath::best_with(avx2_only), ToeplitzPath::Table);
    assert_eq!(
        ToeplitzPath::GfniAvx512.missing_with(avx2_only),
        ["gfni", "avx512f", "avx512bw", "avx512vbmi"]
    );
    // Intel Alder Lake (GFNI with AVX2 only) and Skylake-SP (AVX-512 without
    // GFNI or VBMI): no AVX-512 GFNI path either.
    let gfni_avx2 = cpu(&["avx2", "gfni"]);
    assert_eq!(ToeplitzPath::best_with(gfni_avx2), ToeplitzPath::Table);
    let skylake_sp = cpu(&["avx2", "avx512f", "avx512bw"]);
    assert_eq!(ToeplitzPath::best_with(skylake_sp), ToeplitzPath::Table);
    assert_eq!(
        ToeplitzPath::GfniAvx512.missing_with(skylake_sp),
        ["gfni", "avx512vbmi"]
    );
    // Ice Lake and later Xeons, Zen 4.
    let ice_lake = cpu(&["avx2", "gfni", "avx512f", "avx512bw", "avx512vbmi"]);
    assert_eq!(ToeplitzPath::best_with(ice_lake), ToeplitzPath::GfniAvx512);
    assert!(ToeplitzPath::Table.missing_with(|_| false).is_empty());
}
