//! The scope of a path through symbolic links that lead nowhere yet: the workspace's scope
//! check canonicalises the longest existing prefix of a path, so a link whose target does not
//! exist (`notes.txt -> /home/u/.bashrc.new`, `vendor -> /opt/missing`) passes as the link's
//! own name. Here every link on the path is followed, the last component's too, whether its
//! target exists or not, and the path is judged by where it leads: outside the workspace is
//! denied at scope naming the links, and a target the scope refuses (a secret, toolgate's
//! state, git internals for a write) is denied as that target.
//!
//! A decision aid, not the enforcement: a link can change after this check, and the host's
//! no-follow opening (and the kernel's confinement) still refuse whatever a link does then.

use crate::workspace::{Access, ScopeDenial, Workspace};
use std::collections::VecDeque;
use std::ffi::OsString;
use std::path::{Component, Path, PathBuf};

/// Links followed before giving up, as the kernel's `MAXSYMLINKS`.
const MAX_LINKS: usize = 40;

/// Where `path` (absolute) leads with every symbolic link on it followed, targets that do not
/// exist included, and the links followed (`(link, its target as written)`). `None` after
/// more than [`MAX_LINKS`] links (a loop: opening it fails anyway).
pub(crate) fn resolve(path: &Path) -> Option<(PathBuf, Vec<(PathBuf, PathBuf)>)> {
    let mut pending: VecDeque<OsString> = VecDeque::new();
    push_front(&mut pending, path);
    let mut at = PathBuf::from("/");
    let mut links = Vec::new();
    while let Some(part) = pending.pop_front() {
        match part.to_str() {
            Some("/") => at = PathBuf::from("/"),
            Some(".") => {}
            Some("..") => {
                at.pop();
            }
            _ => {
                let next = at.join(&part);
                let is_link = std::fs::symlink_metadata(&next)
                    .map(|m| m.file_type().is_symlink())
                    .unwrap_or(false);
                if !is_link {
                    at = next;
                    continue;
                }
                if links.len() >= MAX_LINKS {
                    return None;
                }
                let target = std::fs::read_link(&next).ok()?;
                push_front(&mut pending, &target);
                links.push((next, target));
            }
        }
    }
    Some((at, links))
}

/// Put the components of `path` in front of `pending` (`/` first for an absolute one).
fn push_front(pending: &mut VecDeque<OsString>, path: &Path) {
    let parts: Vec<OsString> = path
        .components()
        .map(|c| match c {
            Component::RootDir | Component::Prefix(_) => OsString::from("/"),
            Component::CurDir => OsString::from("."),
            Component::ParentDir => OsString::from(".."),
            Component::Normal(n) => n.to_os_string(),
        })
        .collect();
    for p in parts.into_iter().rev() {
        pending.push_front(p);
    }
}

/// Why `raw` (which passed `workspace.scope`) is refused once its links are followed, if it
/// is: it leads outside the workspace, or to a path the scope refuses for `access`.
pub(crate) fn through_links(
    workspace: &Workspace,
    raw: &str,
    access: Access,
) -> Option<ScopeDenial> {
    let root = workspace.root();
    let given = Path::new(raw);
    let start = if given.is_absolute() {
        given.to_path_buf()
    } else {
        root.join(given)
    };
    let (resolved, links) = resolve(&start)?;
    if links.is_empty() {
        return None;
    }
    let shown = |p: &Path| match p.strip_prefix(root) {
        Ok(rel) if rel.as_os_str().is_empty() => "`.`".to_string(),
        Ok(rel) => format!("`{}`", rel.display()),
        Err(_) => format!("`{}`", p.display()),
    };
    let chain = links
        .iter()
        .map(|(link, target)| format!("{} -> `{}`", shown(link), target.display()))
        .collect::<Vec<_>>()
        .join(", ");
    let Ok(rel) = resolved.strip_prefix(root) else {
        return Some(ScopeDenial {
            reason: format!(
                "`{raw}` goes through the symbolic link {chain} and leads to {}, which is outside the workspace {}",
                resolved.display(),
                root.display()
            ),
            hint: "use a path inside the workspace; symlinks are followed before this check, their targets need not exist"
                .into(),
        });
    };
    let rel = if rel.as_os_str().is_empty() {
        ".".to_string()
    } else {
        rel.to_string_lossy().into_owned()
    };
    workspace
        .scope(&rel, access)
        .err()
        .map(|denial| ScopeDenial {
            reason: format!(
                "`{raw}` goes through the symbolic link {chain} to `{rel}`: {}",
                denial.reason
            ),
            hint: denial.hint,
        })
}
