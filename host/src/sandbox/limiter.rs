//! The call's [`wasmtime::ResourceLimiter`]: caps linear memory at `[limits] max_memory_bytes`
//! and records which limit a refused growth hit, so that the error of the call is classified
//! from that record and not from the text of wasmtime's error.

use crate::error::Limit;

/// Instances, tables and memories one store may create (wasmtime's `StoreLimits` defaults).
const MAX_OBJECTS: usize = 10_000;

/// One store's limiter.
pub(crate) struct CallLimiter {
    /// Most bytes of linear memory per memory.
    memory_bytes: usize,
    /// The limit a refused growth hit (the first one), read by `classify` once the call failed.
    pub(crate) hit: Option<Limit>,
}

impl CallLimiter {
    pub(crate) fn new(memory_bytes: usize) -> Self {
        CallLimiter {
            memory_bytes,
            hit: None,
        }
    }

    /// Refuse a growth by trapping (a guest that is refused memory rarely recovers, and a trap
    /// names the limit), and record the limit.
    fn refuse(&mut self, limit: Limit, what: std::fmt::Arguments<'_>) -> wasmtime::Result<bool> {
        self.hit.get_or_insert(limit);
        Err(wasmtime::Error::msg(format!(
            "forcing trap when growing {what}"
        )))
    }
}

impl wasmtime::ResourceLimiter for CallLimiter {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.memory_bytes || maximum.is_some_and(|max| desired > max) {
            return self.refuse(Limit::Memory, format_args!("memory to {desired} bytes"));
        }
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if maximum.is_some_and(|max| desired > max) {
            return self.refuse(Limit::Table, format_args!("table to {desired} elements"));
        }
        Ok(true)
    }

    fn instances(&self) -> usize {
        MAX_OBJECTS
    }

    fn tables(&self) -> usize {
        MAX_OBJECTS
    }

    fn memories(&self) -> usize {
        MAX_OBJECTS
    }
}

#[cfg(test)]
#[path = "limiter_tests.rs"]
mod tests;
