//! How a guest's call ended when it did not return: a wasmtime error turned into the limit it
//! hit, a cancellation, or a trap with the guest's reason.

use super::Limits;
use crate::error::{Error, Limit};
use wasmtime::Trap;

/// The error a cancelled guest stops with.
#[derive(Debug)]
pub(super) struct Cancelled;

impl std::fmt::Display for Cancelled {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the call was cancelled")
    }
}

impl std::error::Error for Cancelled {}

/// Turn a wasmtime error into the limit it hit, or a trap with the guest's reason.
/// `hit`: the limit the store's limiter refused a growth for, if any.
pub(super) fn classify(error: wasmtime::Error, limits: &Limits, hit: Option<Limit>) -> Error {
    if error.downcast_ref::<Cancelled>().is_some() {
        return Error::Cancelled {
            message: "the client cancelled the call and the tool was interrupted".to_string(),
        };
    }
    if let Some(trap) = error.downcast_ref::<Trap>() {
        match trap {
            Trap::Interrupt => {
                return Error::Limit {
                    limit: Limit::Timeout,
                    message: format!(
                        "the tool ran longer than its {} ms deadline and was stopped",
                        limits.timeout.as_millis()
                    ),
                }
            }
            Trap::StackOverflow => {
                return Error::Limit {
                    limit: Limit::Stack,
                    message: "the tool overflowed its stack (unbounded recursion?) and was stopped"
                        .to_string(),
                }
            }
            _ => {}
        }
    }
    match hit {
        Some(Limit::Memory) => {
            return Error::Limit {
                limit: Limit::Memory,
                message: format!(
                    "the tool tried to use more than its {} byte memory limit and was stopped",
                    limits.max_memory_bytes
                ),
            }
        }
        Some(Limit::Table) => {
            return Error::Limit {
                limit: Limit::Table,
                message: "the tool tried to grow a table past its maximum and was stopped"
                    .to_string(),
            }
        }
        _ => {}
    }
    let text = format!("{error:#}");
    // A Rust guest keeps its stack at the bottom of linear memory, growing down: overflowing it
    // wraps the stack pointer past zero, which faults at an address of 4 GiB or more.
    if fault_address(&text).is_some_and(|a| a >= 1 << 32) {
        return Error::Limit {
            limit: Limit::Stack,
            message: "the tool overflowed its stack (unbounded recursion?) and was stopped"
                .to_string(),
        };
    }
    // The model gets the trap's reason, not wasm backtrace frames.
    let reason = error.root_cause().to_string();
    let first = text.lines().next().unwrap_or_default();
    Error::Trap(if first.contains(&reason) {
        first.to_string()
    } else {
        format!("{first}: {reason}")
    })
}

/// The address in a "memory fault at wasm address 0x…" trap message.
fn fault_address(text: &str) -> Option<u64> {
    let rest = &text[text.find("wasm address 0x")? + "wasm address 0x".len()..];
    let hex: String = rest.chars().take_while(char::is_ascii_hexdigit).collect();
    u64::from_str_radix(&hex, 16).ok()
}
