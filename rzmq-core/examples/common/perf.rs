//! Shared argument parsing for the perf examples (included with `#[path]`).
#![allow(dead_code)]

use std::process::exit;

/// Parses `args[i]` as a number, printing the usage line on failure.
pub(crate) fn num(args: &[String], i: usize, usage: &str) -> usize {
    match args.get(i).and_then(|a| a.parse::<usize>().ok()) {
        Some(v) => v,
        None => {
            println!("usage: {usage}");
            exit(1);
        }
    }
}

/// The string argument `args[i]`, printing the usage line when absent.
pub(crate) fn arg<'a>(args: &'a [String], i: usize, usage: &str) -> &'a str {
    match args.get(i) {
        Some(v) => v,
        None => {
            println!("usage: {usage}");
            exit(1);
        }
    }
}

/// Exits with libzmq's perf-tool style message on an error.
pub(crate) fn check<T>(r: rzmq_core::Result<T>, what: &str) -> T {
    match r {
        Ok(v) => v,
        Err(e) => {
            println!("error in {what}: {e}");
            exit(255);
        }
    }
}
