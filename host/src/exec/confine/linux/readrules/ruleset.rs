//! The ruleset that enforces the rules: every file-system right handled, TCP and scopes where
//! the kernel has them.

use super::*;

/// What [`landlock_only_ruleset`] made this kernel enforce beyond the file-system rights.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Handled {
    /// TCP bind and connect are handled with no rule, so refused (Landlock ABI 4; only when
    /// the policy does not grant the network). UDP and other sockets are not covered.
    pub tcp: bool,
    /// Signals and abstract unix sockets stay inside the command's domain (ABI 6).
    pub scopes: bool,
}
/// Which optional Landlock features this kernel has (probed once).
#[derive(Clone, Copy, Debug)]
pub(super) struct Support {
    /// ABI 4: TCP bind and connect.
    pub(super) tcp: bool,
    /// ABI 6: scopes.
    pub(super) scopes: bool,
}
pub(super) fn support() -> Support {
    static SUPPORT: OnceLock<Support> = OnceLock::new();
    *SUPPORT.get_or_init(|| {
        // With a hard requirement, asking for what the kernel lacks is an error before any
        // ruleset is made.
        let hard = || Ruleset::default().set_compatibility(CompatLevel::HardRequirement);
        Support {
            tcp: hard()
                .handle_access(AccessNet::from_all(ABI::V4))
                .and_then(|r| r.create())
                .is_ok(),
            scopes: hard()
                .scope(Scope::Signal | Scope::AbstractUnixSocket)
                .and_then(|r| r.create())
                .is_ok(),
        }
    })
}
/// Open a rule's path with no symlink on the way, and only if it still names the inode the
/// rule was made for; with whether it is a directory.
pub(super) fn open_rule(rule: &Rule) -> Option<(OwnedFd, bool)> {
    let fd = rustix::fs::openat2(
        rustix::fs::CWD,
        &rule.path,
        OFlags::PATH | OFlags::CLOEXEC,
        Mode::empty(),
        ResolveFlags::NO_SYMLINKS,
    )
    .ok()?;
    let st = rustix::fs::fstat(&fd).ok()?;
    if (st.st_dev as u64, st.st_ino as u64) != (rule.dev, rule.ino) {
        return None;
    }
    Some((
        fd,
        FileType::from_raw_mode(st.st_mode) == FileType::Directory,
    ))
}
/// The landlock-only ruleset: every ABI-3 file-system right handled and allowed only as
/// `rules` say; where the kernel has ABI 4 and the policy does not grant the network, TCP
/// bind and connect handled with no rule (refused); where it has ABI 6, signals and abstract
/// unix sockets scoped to the domain. A hard requirement: a kernel without ABI 3 is an error,
/// never a weaker ruleset. A rule whose path no longer names its inode is left out.
pub fn landlock_only_ruleset(
    rules: &ReadRules,
    network: bool,
) -> Result<(RulesetCreated, Handled), String> {
    let s = support();
    let handled = Handled {
        tcp: s.tcp && !network,
        scopes: s.scopes,
    };
    let e = |e: landlock::RulesetError| format!("preparing Landlock: {e}");
    let mut rs = Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(AccessFs::from_all(ABI_FS))
        .map_err(e)?;
    if handled.tcp {
        rs = rs.handle_access(AccessNet::from_all(ABI::V4)).map_err(e)?;
    }
    if handled.scopes {
        rs = rs
            .scope(Scope::Signal | Scope::AbstractUnixSocket)
            .map_err(e)?;
    }
    let file_rights = AccessFs::from_file(ABI_FS);
    let created = rs
        .create()
        .map_err(e)?
        .add_rules(rules.iter().filter_map(|rule| {
            let (fd, dir) = open_rule(rule)?;
            let access = if dir {
                rule.grant.access()
            } else {
                rule.grant.access() & file_rights
            };
            // A listing-only rule on a file grants nothing.
            (!access.is_empty())
                .then(|| Ok::<_, landlock::RulesetError>(PathBeneath::new(fd, access)))
        }))
        .map_err(e)?;
    Ok((created, handled))
}

/// One rule per path (the widest grant), and none beneath a rule granting as much.
pub(super) fn merged(rules: Vec<Rule>) -> Vec<Rule> {
    let mut by_path: BTreeMap<PathBuf, Rule> = BTreeMap::new();
    for r in rules {
        match by_path.get_mut(&r.path) {
            Some(old) if old.grant >= r.grant => {}
            Some(old) => old.grant = r.grant,
            None => {
                by_path.insert(r.path.clone(), r);
            }
        }
    }
    // Sorted by components, so a rule's ancestors among the kept ones are on the stack.
    let mut out: Vec<Rule> = Vec::with_capacity(by_path.len());
    let mut stack: Vec<(PathBuf, Grant)> = Vec::new();
    for (path, rule) in by_path {
        while stack.last().is_some_and(|(p, _)| !path.starts_with(p)) {
            stack.pop();
        }
        let above = stack.iter().map(|(_, g)| *g).max();
        if above.is_some_and(|g| g >= rule.grant) {
            continue;
        }
        stack.push((path, rule.grant));
        out.push(rule);
    }
    out
}
