//! C ABI over `order::Sorter`, declared in `../steer_sorter.h`.

use std::net::{IpAddr, Ipv4Addr};

use order::sorter::{Descriptor, Sorter, SorterConfig, TcpSegment};
use order::FlowKey;

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

/// The sorter plus reused buffers (no allocation per batch once warm).
pub struct Handle {
    sorter: Sorter,
    descs: Vec<Descriptor>,
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
    match Sorter::new(cfg) {
        Ok(sorter) => Box::into_raw(Box::new(Handle {
            sorter,
            descs: Vec::new(),
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

/// Sorts one batch; writes the indices in delivery order to `out[0..n]`.
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
    if s.is_null() || n == 0 {
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
    load(h, segs);
    h.out.clear();
    h.sorter.sort_batch(&h.descs, &mut h.out);
    let k = h.out.len().min(n);
    out[..k].copy_from_slice(&h.out[..k]);
    k
}

/// Builds the descriptors of `segs` once and keeps them in the handle.
///
/// # Safety
/// `s` live; `segs` points to `n` readable segments.
#[no_mangle]
pub unsafe extern "C" fn steer_sorter_load(s: *mut Handle, segs: *const Seg, n: usize) {
    if s.is_null() || segs.is_null() {
        return;
    }
    // SAFETY: caller contract.
    let (h, segs) = unsafe { (&mut *s, std::slice::from_raw_parts(segs, n)) };
    load(h, segs);
}

/// Sorts the batch kept by `steer_sorter_load` again (what the criterion
/// bench times: descriptors prebuilt); indices to `out[0..n]`.
///
/// # Safety
/// `s` live; `out` points to as many writable `uint32_t`s as were loaded.
#[no_mangle]
pub unsafe extern "C" fn steer_sorter_sort_loaded(s: *mut Handle, out: *mut u32) -> usize {
    if s.is_null() {
        return 0;
    }
    // SAFETY: caller contract.
    let h = unsafe { &mut *s };
    h.out.clear();
    h.sorter.sort_batch(&h.descs, &mut h.out);
    // SAFETY: caller contract (room for every loaded descriptor).
    let out = unsafe { std::slice::from_raw_parts_mut(out, h.descs.len()) };
    let k = h.out.len().min(out.len());
    out[..k].copy_from_slice(&h.out[..k]);
    k
}

fn load(h: &mut Handle, segs: &[Seg]) {
    h.descs.clear();
    h.descs.extend(segs.iter().map(|g| {
        Descriptor::Hold(TcpSegment {
            flow: FlowKey::new(
                IpAddr::V4(Ipv4Addr::from(g.src_ip)),
                g.sport,
                IpAddr::V4(Ipv4Addr::from(g.dst_ip)),
                g.dport,
            ),
            seq: g.seq,
            len: g.len,
        })
    }));
}
