//! C ABI over `rss::ToeplitzTable`, declared in `../steer_toeplitz.h`.

use std::ffi::{c_char, CStr};

use rss::{RssKey, ToeplitzPath, ToeplitzTable};

/// Path names as C strings, in `ToeplitzPath::ALL` order.
const PATH_NAMES: [&CStr; ToeplitzPath::ALL.len()] = [c"gfni-avx512", c"table"];

/// How many Toeplitz paths Steer has (`steer_toeplitz_path_name(0..n)`).
#[no_mangle]
pub extern "C" fn steer_toeplitz_paths() -> usize {
    ToeplitzPath::ALL.len()
}

/// The name of path `i` (fastest first), NULL past the end.
#[no_mangle]
pub extern "C" fn steer_toeplitz_path_name(i: usize) -> *const c_char {
    match ToeplitzPath::ALL.get(i) {
        Some(p) => {
            debug_assert_eq!(PATH_NAMES[i].to_str(), Ok(p.name()));
            PATH_NAMES[i].as_ptr()
        }
        None => std::ptr::null(),
    }
}

/// Builds the tables for `key[..len]` computing with path `path` (an index
/// as for `steer_toeplitz_path_name`). NULL if the key is empty or NULL, the
/// index is out of range, or this CPU cannot run the path; then `why`
/// (if not NULL) receives a NUL-terminated reason, cut to `why_len` bytes.
///
/// # Safety
/// `key` must point to `len` readable bytes; `why` to `why_len` writable
/// bytes or be NULL.
#[no_mangle]
pub unsafe extern "C" fn steer_toeplitz_new_path(
    key: *const u8,
    len: usize,
    path: usize,
    why: *mut c_char,
    why_len: usize,
) -> *mut ToeplitzTable {
    let result = (|| {
        let path = *ToeplitzPath::ALL
            .get(path)
            .ok_or_else(|| format!("no path {path}"))?;
        if key.is_null() {
            return Err("key is NULL".to_string());
        }
        // SAFETY: the caller guarantees `len` readable bytes at `key`.
        let bytes = unsafe { std::slice::from_raw_parts(key, len) }.to_vec();
        let key = RssKey::new(bytes).map_err(|e| e.to_string())?;
        ToeplitzTable::with_path(&key, path).map_err(|e| e.to_string())
    })();
    match result {
        Ok(table) => Box::into_raw(Box::new(table)),
        Err(reason) => {
            if !why.is_null() && why_len > 0 {
                let n = reason.len().min(why_len - 1);
                // SAFETY: caller contract: `why_len` writable bytes.
                let out = unsafe { std::slice::from_raw_parts_mut(why.cast::<u8>(), why_len) };
                out[..n].copy_from_slice(&reason.as_bytes()[..n]);
                out[n] = 0;
            }
            std::ptr::null_mut()
        }
    }
}

/// The index of the path `ToeplitzTable::new` picks on this CPU.
#[no_mangle]
pub extern "C" fn steer_toeplitz_default_path() -> usize {
    let best = ToeplitzPath::detect();
    ToeplitzPath::ALL
        .iter()
        .position(|&p| p == best)
        .unwrap_or(ToeplitzPath::ALL.len() - 1)
}

/// Frees a table from `steer_toeplitz_new_path` (NULL is ignored).
///
/// # Safety
/// `table` must come from `steer_toeplitz_new_path` and not be used afterwards.
#[no_mangle]
pub unsafe extern "C" fn steer_toeplitz_free(table: *mut ToeplitzTable) {
    if !table.is_null() {
        // SAFETY: it came from Box::into_raw in steer_toeplitz_new_path.
        drop(unsafe { Box::from_raw(table) });
    }
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
