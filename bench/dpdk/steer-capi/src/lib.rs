//! C ABI over `rss::ToeplitzTable`, declared in `../steer_toeplitz.h`.

use rss::{RssKey, ToeplitzTable};

/// Builds the tables for `key[..len]`; NULL if the key is empty or NULL.
///
/// # Safety
/// `key` must point to `len` readable bytes.
#[no_mangle]
pub unsafe extern "C" fn steer_toeplitz_new(key: *const u8, len: usize) -> *mut ToeplitzTable {
    if key.is_null() {
        return std::ptr::null_mut();
    }
    // SAFETY: the caller guarantees `len` readable bytes at `key`.
    let bytes = unsafe { std::slice::from_raw_parts(key, len) }.to_vec();
    match RssKey::new(bytes) {
        Ok(key) => Box::into_raw(Box::new(ToeplitzTable::new(&key))),
        Err(_) => std::ptr::null_mut(),
    }
}

/// Frees a table from `steer_toeplitz_new` (NULL is ignored).
///
/// # Safety
/// `table` must come from `steer_toeplitz_new` and not be used afterwards.
#[no_mangle]
pub unsafe extern "C" fn steer_toeplitz_free(table: *mut ToeplitzTable) {
    if !table.is_null() {
        // SAFETY: it came from Box::into_raw in steer_toeplitz_new.
        drop(unsafe { Box::from_raw(table) });
    }
}

/// 1 if the batch functions use the GFNI/AVX-512 path on this CPU.
///
/// # Safety
/// `table` must be a live table from `steer_toeplitz_new`.
#[no_mangle]
pub unsafe extern "C" fn steer_toeplitz_uses_simd(table: *const ToeplitzTable) -> i32 {
    // SAFETY: caller contract.
    i32::from(unsafe { &*table }.uses_simd())
}

/// Hash of one IPv4 4-tuple (12 bytes, network order).
///
/// # Safety
/// `table` live; `tuple` points to 12 readable bytes.
#[no_mangle]
pub unsafe extern "C" fn steer_toeplitz_v4(
    table: *const ToeplitzTable,
    tuple: *const [u8; 12],
) -> u32 {
    // SAFETY: caller contract.
    unsafe { (*table).hash_v4_4tuple(&*tuple) }
}

/// Hashes `n` contiguous IPv4 4-tuples into `out[0..n]`.
///
/// # Safety
/// `table` live; `tuples` points to `n * 12` readable bytes, `out` to `n`
/// writable `uint32_t`s, not overlapping.
#[no_mangle]
pub unsafe extern "C" fn steer_toeplitz_batch_v4(
    table: *const ToeplitzTable,
    tuples: *const [u8; 12],
    out: *mut u32,
    n: usize,
) {
    if n == 0 {
        return;
    }
    // SAFETY: caller contract.
    let (table, tuples, out) = unsafe {
        (
            &*table,
            std::slice::from_raw_parts(tuples, n),
            std::slice::from_raw_parts_mut(out, n),
        )
    };
    table.hash_batch_v4(tuples, out);
}
