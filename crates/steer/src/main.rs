//! `steer`: parses arguments, calls the library crates, prints their results.
//!
//! Exit codes (DESIGN.md): 0 ok, 1 the thing checked is false (no command
//! checks anything yet), 2 bad input or
//! usage, 3 missing privilege or kernel feature.

mod cli;
mod cmd;
mod exit;
mod output;

fn main() {
    let args = cli::Cli::parse_from_env_or_exit();
    let code = match cmd::run(args) {
        Ok(code) => code,
        Err(err) => exit::report(&err),
    };
    std::process::exit(code);
}
