//! Symmetric hashing: the 0x6d5a key and the sym-xor / sym-or-xor transforms
//! give both directions of a flow the same hash.

use proptest::prelude::*;
use rss::{FlowTuple, InputTransform, L4Proto, RssConfig, RssKey};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

fn addr_pair() -> impl Strategy<Value = (IpAddr, IpAddr)> {
    prop_oneof![
        (any::<u32>(), any::<u32>())
            .prop_map(|(a, b)| (Ipv4Addr::from(a).into(), Ipv4Addr::from(b).into())),
        (any::<u128>(), any::<u128>())
            .prop_map(|(a, b)| (Ipv6Addr::from(a).into(), Ipv6Addr::from(b).into())),
    ]
}

fn flow() -> impl Strategy<Value = FlowTuple> {
    (addr_pair(), any::<u16>(), any::<u16>(), any::<bool>()).prop_map(|((s, d), sp, dp, tcp)| {
        let proto = if tcp { L4Proto::Tcp } else { L4Proto::Udp };
        FlowTuple::new(s, sp, d, dp, proto)
    })
}

fn config(key: RssKey, transform: InputTransform) -> RssConfig {
    let mut config = RssConfig::ethtool_default(key, 8, 128).unwrap();
    config.fields = rss::HashFieldsByFlow::all_four_tuple();
    config.input_transform = transform;
    config
}

proptest! {
    #[test]
    fn symmetric_key_hashes_both_directions_alike(t in flow()) {
        let c = config(RssKey::symmetric(40), InputTransform::None);
        prop_assert_eq!(c.hash(&t).unwrap(), c.hash(&t.reversed()).unwrap());
    }

    #[test]
    fn sym_xor_is_symmetric_for_any_key(t in flow(), key in proptest::collection::vec(any::<u8>(), 40..53)) {
        let c = config(RssKey::new(key).unwrap(), InputTransform::SymXor);
        prop_assert_eq!(c.hash(&t).unwrap(), c.hash(&t.reversed()).unwrap());
    }

    #[test]
    fn sym_or_xor_is_symmetric_for_any_key(t in flow(), key in proptest::collection::vec(any::<u8>(), 40..53)) {
        let c = config(RssKey::new(key).unwrap(), InputTransform::SymOrXor);
        prop_assert_eq!(c.hash(&t).unwrap(), c.hash(&t.reversed()).unwrap());
    }
}

#[test]
fn microsoft_key_is_not_symmetric() {
    let c = config(RssKey::microsoft(), InputTransform::None);
    let t = FlowTuple::new(
        "10.0.0.1".parse().unwrap(),
        40000,
        "10.0.0.2".parse().unwrap(),
        5201,
        L4Proto::Tcp,
    );
    assert_ne!(c.hash(&t).unwrap(), c.hash(&t.reversed()).unwrap());
}
