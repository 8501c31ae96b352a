//! `steer`: parses arguments, calls the library crates, prints their results.
//!
//! Exit codes: 0 ok, 1 the operation failed or the thing checked is false,
//! 2 bad usage or input, 3 missing privilege or kernel feature; the table
//! and how errors are classified are in [`exit`].

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
