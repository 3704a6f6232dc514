//! The built-in tools by kind: a closed enum, so code that treats one built-in specially
//! (the gate's read record, the shell's exec keys, the job tools, fetch's and download's
//! network checks) matches on a variant instead of comparing names.

use super::descriptor::ToolInfo;

/// One built-in tool. The same set as the built-ins table (`builtins!` in `registry.rs`), in
/// its order; a test fails when the two disagree.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Builtin {
    /// `read`: a file's lines.
    Read,
    /// `ls`: a directory's entries.
    Ls,
    /// `glob`: paths matching a pattern.
    Glob,
    /// `grep`: lines matching a regex.
    Grep,
    /// `write`: a whole file.
    Write,
    /// `edit`: one replacement in a file.
    Edit,
    /// `multiedit`: several replacements in one file.
    MultiEdit,
    /// `shell`: a command run on the host.
    Shell,
    /// `job_output`: the output of a background job.
    JobOutput,
    /// `job_kill`: stop a background job.
    JobKill,
    /// `fetch`: an HTTP request.
    Fetch,
    /// `download`: a URL saved into a workspace file.
    Download,
    /// `lsp_diagnostics`: a file's (or the workspace's) problems from its language server.
    LspDiagnostics,
    /// `lsp_definition`: where a symbol is defined.
    LspDefinition,
    /// `lsp_references`: where a symbol is used.
    LspReferences,
    /// `lsp_symbols`: a file's symbols, or the workspace's matching a query.
    LspSymbols,
    /// `lsp_call_hierarchy`: a function's callers and callees.
    LspCallHierarchy,
    /// `lsp_rename`: a symbol renamed in every file that uses it.
    LspRename,
    /// `lsp_replace_symbol`: a symbol's whole definition replaced.
    LspReplaceSymbol,
    /// `lsp_restart`: a language server stopped, to start afresh.
    LspRestart,
}

impl Builtin {
    /// Every built-in, in the table's order.
    pub const ALL: [Builtin; 20] = [
        Builtin::Read,
        Builtin::Ls,
        Builtin::Glob,
        Builtin::Grep,
        Builtin::Write,
        Builtin::Edit,
        Builtin::MultiEdit,
        Builtin::Shell,
        Builtin::JobOutput,
        Builtin::Fetch,
        Builtin::JobKill,
        Builtin::Download,
        Builtin::LspDiagnostics,
        Builtin::LspDefinition,
        Builtin::LspReferences,
        Builtin::LspSymbols,
        Builtin::LspCallHierarchy,
        Builtin::LspRename,
        Builtin::LspReplaceSymbol,
        Builtin::LspRestart,
    ];

    /// The tool's name as served.
    pub const fn as_str(self) -> &'static str {
        match self {
            Builtin::Read => "read",
            Builtin::Ls => "ls",
            Builtin::Glob => "glob",
            Builtin::Grep => "grep",
            Builtin::Write => "write",
            Builtin::Edit => "edit",
            Builtin::MultiEdit => "multiedit",
            Builtin::Shell => "shell",
            Builtin::JobOutput => "job_output",
            Builtin::JobKill => "job_kill",
            Builtin::Fetch => "fetch",
            Builtin::Download => "download",
            Builtin::LspDiagnostics => "lsp_diagnostics",
            Builtin::LspDefinition => "lsp_definition",
            Builtin::LspReferences => "lsp_references",
            Builtin::LspSymbols => "lsp_symbols",
            Builtin::LspCallHierarchy => "lsp_call_hierarchy",
            Builtin::LspRename => "lsp_rename",
            Builtin::LspReplaceSymbol => "lsp_replace_symbol",
            Builtin::LspRestart => "lsp_restart",
        }
    }

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
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for b in Builtin::ALL {
            assert_eq!(Builtin::from_name(b.as_str()), Some(b));
        }
        assert_eq!(Builtin::from_name("plugin__read"), None);
        assert_eq!(Builtin::from_name("Read"), None);
    }
}
