//! Build-time plumbing for the crates whose kernel-facing parts are C (the
//! software RSS in `nic`, the load balancer in `lbxdp`, the binders in
//! `binder`), called from their `build.rs`:
//!
//! - [`BpfProgram::build`] compiles a `.bpf.c` with clang and generates its
//!   libbpf-rs skeleton into `OUT_DIR` (never committed: libbpf-bootstrap's
//!   and libbpf-rs's `runqslower` habit), so the Rust side uses the
//!   skeleton's generated map and struct types, never a hand copy; the
//!   headers in `bpf/` (per-CPU event counters) are on every program's
//!   include path, so programs of different crates share them;
//! - [`PreloadShim::build`] compiles an LD_PRELOAD shim (C) into a shared
//!   object in `OUT_DIR`, which its crate embeds with `include_bytes!` and
//!   installs with `host::preload`;
//! - [`header_constants`] turns the `#define NAME VALUE` lines of the header
//!   shared by C and Rust into `pub const NAME` items in `OUT_DIR`, so the
//!   limits, flags and slot numbers have one home: the header (the habit
//!   Katran's `BalancerStructs.h` "must be in sync" comment warns against
//!   breaking).

use std::env;
use std::fmt::Write as _;
use std::path::PathBuf;

use libbpf_cargo::SkeletonBuilder;

fn out_dir() -> PathBuf {
    PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"))
}

/// An LD_PRELOAD shim to compile: its source, include directories, and
/// whether only the functions it marks are exported (`-fvisibility=hidden`
/// with `__attribute__((visibility("default")))` on the wrappers).
pub struct PreloadShim<'a> {
    pub source: &'a str,
    pub include_dirs: &'a [&'a str],
    pub exports_marked: bool,
}

impl PreloadShim<'_> {
    /// Compiles the shim (`-O2 -Wall -Wextra -Werror`, linked with libdl
    /// and libpthread) into `OUT_DIR/{output}` with the compiler the `cc`
    /// crate picks. Paths are relative to the calling crate.
    pub fn build(&self, output: &str) -> PathBuf {
        let so = out_dir().join(output);
        let compiler = cc::Build::new().opt_level(2).pic(true).get_compiler();
        let mut cmd = compiler.to_command();
        let visibility = if self.exports_marked {
            "-fvisibility=hidden"
        } else {
            "-fvisibility=default"
        };
        cmd.args([
            "-shared", "-fPIC", visibility, "-Wall", "-Wextra", "-Werror",
        ]);
        for dir in self.include_dirs {
            cmd.args(["-I", dir]);
        }
        cmd.arg("-o")
            .arg(&so)
            .arg(self.source)
            .args(["-ldl", "-lpthread"]);
        let status = cmd
            .status()
            .unwrap_or_else(|e| panic!("running the C compiler for {}: {e}", self.source));
        assert!(
            status.success(),
            "compiling {} failed: {cmd:?}",
            self.source
        );
        println!("cargo:rerun-if-changed={}", self.source);
        so
    }
}

/// The directory of the BPF headers shared by programs of several crates
/// (`bpf/`), on every program's include path.
const SHARED_BPF_HEADERS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/bpf");

/// A BPF program to compile: its source, the headers it includes (watched
/// for changes), include directories and extra clang arguments.
pub struct BpfProgram<'a> {
    pub source: &'a str,
    pub headers: &'a [&'a str],
    pub include_dirs: &'a [&'a str],
    pub clang_args: &'a [&'a str],
}

impl BpfProgram<'_> {
    /// Compiles the program (`-O2 -Wall -Werror`) and writes its skeleton to
    /// `OUT_DIR/{skeleton}`. Paths are relative to the calling crate.
    pub fn build(&self, skeleton: &str) {
        let arch = env::var("CARGO_CFG_TARGET_ARCH").expect("cargo sets CARGO_CFG_TARGET_ARCH");
        let manifest = PathBuf::from(
            env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"),
        );
        // The uapi headers (<linux/if_ether.h>, ...) include <asm/types.h>,
        // which Debian keeps under the multiarch directory.
        let mut args = vec![format!("-I/usr/include/{arch}-linux-gnu")];
        // The headers every program may include (steer_counters.h), from
        // this crate's own bpf/ directory.
        args.push(format!("-I{SHARED_BPF_HEADERS}"));
        args.extend(
            self.include_dirs
                .iter()
                .map(|d| format!("-I{}", manifest.join(d).display())),
        );
        args.extend(["-O2", "-Wall", "-Werror"].map(String::from));
        args.extend(self.clang_args.iter().map(|a| a.to_string()));
        SkeletonBuilder::new()
            .source(self.source)
            .clang_args(args)
            .build_and_generate(out_dir().join(skeleton))
            .unwrap_or_else(|e| {
                panic!(
                    "building {} (needs clang and libbpf-dev headers): {e:#}",
                    self.source
                )
            });
        println!("cargo:rerun-if-changed={}", self.source);
        for h in self.headers {
            println!("cargo:rerun-if-changed={h}");
        }
        println!("cargo:rerun-if-changed={SHARED_BPF_HEADERS}");
    }
}

/// Writes the `#define`s of `header` (relative to the calling crate) with a
/// value [`parse_define`] understands as Rust constants to `OUT_DIR/{out}`,
/// for `include!`. A define of another shape (an include guard, a macro
/// with arguments) yields no constant, so Rust code that needs it does not
/// compile.
pub fn header_constants(header: &str, out: &str) {
    let text = std::fs::read_to_string(header).unwrap_or_else(|e| panic!("reading {header}: {e}"));
    std::fs::write(out_dir().join(out), rust_constants(header, &text))
        .unwrap_or_else(|e| panic!("writing {out}: {e}"));
    println!("cargo:rerun-if-changed={header}");
}

/// The value of one `#define`, as Rust can hold it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    Integer(u64),
    Text(String),
}

/// `#define NAME VALUE` with VALUE an integer literal (decimal or hex, with
/// C's `u`/`l` suffixes), `(1u << N)`, or a string literal without escapes;
/// comments after the value are ignored. `None` for any other line.
pub fn parse_define(line: &str) -> Option<(&str, Value)> {
    let rest = line.trim_start().strip_prefix("#define")?;
    if !rest.starts_with([' ', '\t']) {
        return None;
    }
    let rest = rest.trim_start();
    let name_len = rest
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(rest.len());
    let (name, value) = rest.split_at(name_len);
    // A '(' right after the name makes a function-like macro.
    if name.is_empty() || value.starts_with('(') {
        return None;
    }
    let value = strip_comment(value).trim();
    Some((name, parse_value(value)?))
}

fn strip_comment(value: &str) -> &str {
    let end = [value.find("/*"), value.find("//")]
        .into_iter()
        .flatten()
        .min()
        .unwrap_or(value.len());
    &value[..end]
}

fn parse_value(value: &str) -> Option<Value> {
    if let Some(text) = value.strip_prefix('"').and_then(|v| v.strip_suffix('"')) {
        return (!text.contains(['\\', '"'])).then(|| Value::Text(text.to_string()));
    }
    if let Some(shift) = value.strip_prefix('(').and_then(|v| v.strip_suffix(')')) {
        let (one, bits) = shift.split_once("<<")?;
        let (one, bits) = (integer(one.trim())?, integer(bits.trim())?);
        return (one == 1 && bits < 64).then(|| Value::Integer(1u64 << bits));
    }
    integer(value).map(Value::Integer)
}

fn integer(literal: &str) -> Option<u64> {
    let digits = literal.trim_end_matches(['u', 'U', 'l', 'L']);
    match digits
        .strip_prefix("0x")
        .or_else(|| digits.strip_prefix("0X"))
    {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None if digits.bytes().all(|b| b.is_ascii_digit()) && !digits.is_empty() => {
            digits.parse().ok()
        }
        None => None,
    }
}

/// The Rust source of the constants of a header's text: `u32` where the
/// value fits, else `u64`; strings as `&str`.
pub fn rust_constants(header: &str, text: &str) -> String {
    let mut out = format!("// Generated by buildkit from {header}: edit the header, not this.\n");
    for (name, value) in text.lines().filter_map(parse_define) {
        let _ = match value {
            Value::Integer(v) if v <= u64::from(u32::MAX) => {
                writeln!(out, "pub const {name}: u32 = {v};")
            }
            Value::Integer(v) => writeln!(out, "pub const {name}: u64 = {v};"),
            Value::Text(t) => writeln!(out, "pub const {name}: &str = {t:?};"),
        };
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_flags_and_strings_become_constants() {
        assert_eq!(
            parse_define("#define SOFTRSS_MAX_QUEUES 256"),
            Some(("SOFTRSS_MAX_QUEUES", Value::Integer(256)))
        );
        assert_eq!(
            parse_define("#define F_DST_PORT (1u << 3)"),
            Some(("F_DST_PORT", Value::Integer(8)))
        );
        assert_eq!(
            parse_define("#define STAT_PASS  3 /* not for the VIP */"),
            Some(("STAT_PASS", Value::Integer(3)))
        );
        assert_eq!(
            parse_define("#define MASK 0xffffFFFFu // all"),
            Some(("MASK", Value::Integer(0xffff_ffff)))
        );
        assert_eq!(
            parse_define("#define SOCK \"/run/steer/alloc.sock\""),
            Some(("SOCK", Value::Text("/run/steer/alloc.sock".into())))
        );
    }

    #[test]
    fn guards_macros_and_expressions_are_left_out() {
        for line in [
            "#define STEER_SOFTRSS_H",
            "#define MIN(a, b) ((a) < (b) ? (a) : (b))",
            "#define TWICE (2 * X)",
            "#define _GNU_SOURCE",
            "#defineX 3",
            "int x = 3;",
            "#define ESCAPED \"a\\\"b\"",
            "#define HUGE (1u << 70)",
        ] {
            assert_eq!(parse_define(line), None, "{line}");
        }
    }

    #[test]
    fn rust_constants_pick_the_narrowest_type() {
        let src = rust_constants(
            "x.h",
            "#define A 7\n#define B 0x100000000\n#define C \"c\"\n#define G_H\n",
        );
        assert!(src.contains("pub const A: u32 = 7;"), "{src}");
        assert!(src.contains("pub const B: u64 = 4294967296;"), "{src}");
        assert!(src.contains("pub const C: &str = \"c\";"), "{src}");
        assert!(!src.contains("G_H"), "{src}");
    }
}
