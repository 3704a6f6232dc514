//! The built-in tools by kind: a closed enum, so code that treats one built-in specially
//! (the gate's read record, the shell's exec keys, the job tools, fetch's and download's
//! network checks) matches on a variant instead of comparing names.

use super::descriptor::ToolInfo;

/// The enum from the one table of the built-ins (`host/builtins.toml`, whose rows
/// `host/build.rs` writes into `$OUT_DIR/builtins.rs`): a variant per row, documented by its
/// summary, with [`Builtin::ALL`] and [`Builtin::as_str`].
macro_rules! builtins {
    ($($variant:ident => $name:literal, $stem:literal, $summary:literal;)*) => {
        /// One built-in tool: a row of the built-ins table, in its order (the same set and
        /// order as the registry's [`crate::tools::registry::BUILTINS`]).
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum Builtin {
            $(
                #[doc = concat!("`", $name, "`: ", $summary)]
                $variant,
            )*
        }

        impl Builtin {
            /// Every built-in, in the table's order.
            pub const ALL: [Builtin; [$($name),*].len()] = [$(Builtin::$variant),*];

            /// The tool's name as served.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $(Builtin::$variant => $name,)*
                }
            }
        }
    };
}

include!(concat!(env!("OUT_DIR"), "/builtins.rs"));

impl Builtin {
    /// The built-in served as `name`, if one is. A name alone does not make a tool a
    /// built-in (see [`ToolInfo::builtin_kind`]).
    pub fn from_name(name: &str) -> Option<Builtin> {
        Builtin::ALL.into_iter().find(|b| b.as_str() == name)
    }

    /// The job tools: they act on jobs the shell started, so they need no permission of
    /// their own.
    pub const fn is_job_tool(self) -> bool {
        matches!(self, Builtin::JobOutput | Builtin::JobKill)
    }

    /// The language-server tools that change files: the gate computes their change before
    /// anyone is asked, shows it, and the tool applies exactly that.
    pub const fn is_lsp_write(self) -> bool {
        matches!(self, Builtin::LspRename | Builtin::LspReplaceSymbol)
    }

    /// The tools whose cost grows with the workspace (they walk it): a server runs them
    /// apart from quick calls (see `crate::sandbox::bulk`).
    pub const fn is_scan(self) -> bool {
        matches!(self, Builtin::Grep | Builtin::Glob | Builtin::Ls)
    }
}

impl std::fmt::Display for Builtin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl ToolInfo {
    /// Which built-in this tool is: `None` for plugins and components loaded from files,
    /// even when one calls itself like a built-in.
    pub fn builtin_kind(&self) -> Option<Builtin> {
        if self.builtin && self.plugin.is_none() {
            Builtin::from_name(&self.name)
        } else {
            None
        }
    }
}

#[cfg(test)]
#[path = "builtin_tests.rs"]
mod tests;
