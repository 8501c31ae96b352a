//! C ABI over `order::Sorter`, declared in `../steer_sorter.h`.

use order::sorter::{Descriptor, Sorter, SorterConfig, TcpSegment};
use order::FlowKeyV4;

/// `struct steer_seg`.
#[repr(C)]
pub struct Seg {
    src_ip: u32,
    dst_ip: u32,
    sport: u16,
    dport: u16,
    seq: u32,
    len: u32,
}

/// The sorter, keyed by the IPv4 4-tuple's header words, plus a reused
/// output buffer (no allocation per batch once warm).
pub struct Handle {
    sorter: Sorter<FlowKeyV4>,
    out: Vec<u32>,
}

/// A sorter with Listing 1's semantics; NULL if the sizes are invalid.
#[no_mangle]
pub extern "C" fn steer_sorter_new(block_size: u32, ring_size: u32) -> *mut Handle {
    let cfg = SorterConfig {
        block_size,
        ring_size,
        ..SorterConfig::paper()
    };
    match Sorter::new_keyed(cfg) {
        Ok(sorter) => Box::into_raw(Box::new(Handle {
            sorter,
            out: Vec::new(),
        })),
        Err(_) => std::ptr::null_mut(),
    }
}

/// Frees a sorter from `steer_sorter_new` (NULL is ignored).
///
/// # Safety
/// `s` must come from `steer_sorter_new` and not be used afterwards.
#[no_mangle]
pub unsafe extern "C" fn steer_sorter_free(s: *mut Handle) {
    if !s.is_null() {
        // SAFETY: it came from Box::into_raw in steer_sorter_new.
        drop(unsafe { Box::from_raw(s) });
    }
}

/// Sorts one batch: a descriptor per segment, pushed as built, then the end
/// of the batch; writes the indices in delivery order to `out[0..n]`.
///
/// # Safety
/// `s` live; `segs` points to `n` readable segments, `out` to `n` writable
/// `uint32_t`s.
#[no_mangle]
pub unsafe extern "C" fn steer_sorter_sort_batch(
    s: *mut Handle,
    segs: *const Seg,
    n: usize,
    out: *mut u32,
) -> usize {
    if s.is_null() || segs.is_null() || out.is_null() || n == 0 || n > u32::MAX as usize {
        return 0;
    }
    // SAFETY: caller contract.
    let (h, segs, out) = unsafe {
        (
            &mut *s,
            std::slice::from_raw_parts(segs, n),
            std::slice::from_raw_parts_mut(out, n),
        )
    };
    h.out.clear();
    h.out.reserve(n);
    for (id, g) in (0u32..).zip(segs) {
        let desc = Descriptor::Hold(TcpSegment {
            flow: FlowKeyV4::new(g.src_ip, g.sport, g.dst_ip, g.dport),
            seq: g.seq,
            len: g.len,
        });
        h.sorter.push(id, &desc, &mut h.out);
    }
    h.sorter.end_batch(&mut h.out);
    let k = h.out.len().min(n);
    out[..k].copy_from_slice(&h.out[..k]);
    k
}
