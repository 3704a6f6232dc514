//! Stage 3 of the ladder: the mode, read from its one place at decision time. `safe` denies
//! every tool that is more than read-only; `allow-all` approves what no rule or hook decided.

use super::decision::{Decision, Refusal, Stage};
use super::observe;
use crate::policy::Mode;
use crate::tools::{Risk, ToolInfo};

/// The mode's refusal, if it refuses this tool.
pub(crate) fn check(mode: Mode, info: &ToolInfo, call_id: &str) -> Result<(), Refusal> {
    if mode == Mode::Safe && info.risk > Risk::ReadOnly {
        return Err(observe::deny(
            &info.name,
            call_id,
            Stage::Mode,
            "mode safe".into(),
            format!(
                "`{}` is a {} tool and the mode is `safe` (read-only)",
                info.name,
                info.risk.as_str()
            ),
            "switch the mode to `ask` (`mode = \"ask\"` in .toolgate/policy.toml or `--mode ask`)"
                .into(),
        ));
    }
    Ok(())
}

/// In `allow-all`, the mode approves the call.
pub(crate) fn allow_all(mode: Mode) -> Option<Decision> {
    (mode == Mode::AllowAll).then(|| Decision::allow(Stage::Mode, "mode allow-all".into()))
}

#[cfg(test)]
#[path = "mode_tests.rs"]
mod tests;
