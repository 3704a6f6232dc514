//! Preparing a command: the confinement chosen, the view and environment built, the program
//! resolved; everything but starting it.

use super::gitwatch::GitWatch;
use super::{confine, ApprovedCommand, ExecError, ExecHost, Plan};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// A command ready to start: what to run and how to confine it, with the private directories
/// and pids cgroup it needs (removed when dropped).
pub struct Prepared {
    /// What to run, exactly confined as chosen.
    pub request: super::spawner::Request,
    /// The command's private directories.
    pub dirs: confine::CallDirs,
    /// Its pids cgroup, where the host can make one.
    pub pids: Option<confine::PidsCgroup>,
    /// The confinement chosen.
    pub confinement: confine::Confinement,
    pub(super) git_watch: Option<GitWatch>,
}

/// Choose the confinement, build the view and the environment, resolve the program: everything
/// but starting it, for a command the host forks itself (long-lived servers such as language
/// servers); the command gets a pids cgroup of its own.
pub fn prepare(host: &ExecHost, approved: &ApprovedCommand) -> Result<Prepared, ExecError> {
    prepare_with(host, approved, false)
}

/// [`prepare`] for a command the gate's spawner starts (used by [`spawn`]): with a PID
/// namespace to end it as a whole, it counts against the spawner's shared pids cgroup
/// instead of joining one of its own (no cgroup move before it starts).
pub fn prepare_spawned(host: &ExecHost, approved: &ApprovedCommand) -> Result<Prepared, ExecError> {
    prepare_with(host, approved, true)
}

fn prepare_with(
    host: &ExecHost,
    approved: &ApprovedCommand,
    spawned: bool,
) -> Result<Prepared, ExecError> {
    let dirs = confine::CallDirs::create().map_err(ExecError::Confine)?;
    let read_only = approved.class == "read-only";
    let mut confinement = confine::available(host.config.network);
    let shared = if spawned && confinement.pidns {
        host.spawner.shared_pids_limit()
    } else {
        None
    };
    let pids = match shared {
        Some(_) => None,
        None => confine::PidsCgroup::create(host.config.max_processes),
    };
    confinement.pids_limit = shared.or(pids.as_ref().map(|p| p.limit()));
    // No pids cgroup here (an ordinary user without a delegated one): the command's own user
    // namespace counts its tasks, and `RLIMIT_NPROC` there bounds them.
    if confinement.pids_limit.is_none() && confinement.mode == confine::NsMode::UserNamespace {
        confinement.nproc_limit = Some(host.config.max_processes);
    }
    // Landlock-only, not root (root is exempt from `RLIMIT_NPROC`): the limit counts every task
    // of this user, so it is what the user runs now plus the command's share.
    #[cfg(target_os = "linux")]
    if confinement.pids_limit.is_none()
        && confinement.mode == confine::NsMode::LandlockOnly
        && !rustix::process::getuid().is_root()
    {
        confinement.nproc_limit =
            Some(confine::user_tasks().saturating_add(host.config.max_processes));
    }
    confinement.read_only = read_only;
    confinement.egress = approved.net.is_some();
    // Without a mount namespace only Landlock keeps secrets unread: without it too, nothing
    // would, so the command does not run whatever the policy says.
    if !confinement.view && !confinement.landlock {
        return Err(ExecError::Confine(
            "no layer can keep the workspace's secrets from a command on this host: there is no mount namespace (user namespaces are refused here) and no Landlock (Linux 5.19 or later with `landlock` in the `lsm=` boot parameter); `toolgate doctor` says why and how to fix each".into(),
        ));
    }
    if host.config.require_confinement && !confinement.complete() {
        return Err(ExecError::ConfinementUnavailable {
            missing: confinement.missing(),
        });
    }
    // With a view the command's /tmp is its private one; without, TMPDIR points at it.
    let tmp_seen = if confinement.view {
        PathBuf::from("/tmp")
    } else {
        dirs.tmp()
    };
    let mut env = confine::scrubbed_env(&host.config, &host.workspace, &tmp_seen);
    // Without a view `$HOME` is the host's, which the command may not write (landlock-only):
    // caches go to its private home (a language server's among them: jedi finds nothing
    // without one).
    if !confinement.view && !env.iter().any(|(k, _)| k == "XDG_CACHE_HOME") {
        env.push((
            "XDG_CACHE_HOME".into(),
            dirs.path()
                .join("home")
                .join(".cache")
                .display()
                .to_string(),
        ));
    }
    host.config.credentials.apply(&mut env);
    if let Some(net) = &approved.net {
        net.proxy_env(&mut env);
    }
    let path = env
        .iter()
        .find(|(k, _)| k == "PATH")
        .map(|(_, v)| v.clone())
        .unwrap_or_default();
    let resolved = clean_path_resolved(&path, &host.workspace);
    let dirs_on_path: Vec<PathBuf> = resolved.iter().map(|(p, _)| p.clone()).collect();
    // Where each PATH entry really is (symlinks resolved): what the view binds, or what
    // Landlock grants without one.
    let path_dirs: Vec<PathBuf> = resolved.into_iter().map(|(_, c)| c).collect();
    let (program, arg0, args) = match &approved.plan {
        Plan::Argv(argv) => {
            let program =
                lookup(&argv[0], &dirs_on_path).ok_or_else(|| ExecError::ProgramNotFound {
                    program: argv[0].clone(),
                })?;
            (program, argv[0].clone(), argv[1..].to_vec())
        }
        Plan::Bash(text) => {
            let bash = lookup("bash", &dirs_on_path).unwrap_or_else(|| PathBuf::from("/bin/bash"));
            (
                bash,
                "bash".to_string(),
                vec!["-c".to_string(), text.clone()],
            )
        }
    };
    let mut git_watch = None;
    let view = if confinement.view {
        let plan = host.view_plan()?;
        git_watch = Some(GitWatch::new(&host.workspace, &plan.git_unprotected));
        let home = env
            .iter()
            .find(|(k, _)| k == "HOME")
            .map(|(_, v)| PathBuf::from(v));
        let spec = confine::build_view(
            &dirs,
            &confine::ViewInputs {
                workspace: &host.workspace,
                cwd: &approved.cwd,
                read_only,
                plan: &plan,
                home: home.as_deref(),
                path_dirs: &path_dirs,
                extra_read: &host.config.read,
                extra_write: &host.config.write,
            },
        )
        .map_err(ExecError::Confine)?;
        confinement.masks = u32::try_from(
            spec.plan.secret_files.len() + spec.plan.secret_dirs.len() + spec.masked_files.len(),
        )
        .unwrap_or(u32::MAX);
        Some(spec)
    } else {
        None
    };
    let mut writable = vec![dirs.tmp()];
    if !read_only {
        writable.push(host.workspace.clone());
    }
    #[cfg(target_os = "linux")]
    let landlock_only = if confinement.mode == confine::NsMode::LandlockOnly {
        let (rules, hidden) = landlock_only_rules(host, &dirs, &env, &path_dirs, read_only)?;
        // What Landlock hides here is what the view would mask.
        confinement.masks = hidden;
        Some(rules)
    } else {
        None
    };
    let request = super::spawner::Request {
        id: 0,
        program,
        arg0,
        args,
        env,
        cwd: approved.cwd.clone(),
        confinement,
        view,
        writable,
        cgroup: pids.is_some(),
        netns: approved.net.is_some(),
        netns_user: approved.net.as_ref().is_some_and(|n| n.user.is_some()),
        shared_pids: shared.is_some(),
        #[cfg(target_os = "linux")]
        landlock_only,
    };
    Ok(Prepared {
        request,
        dirs,
        pids,
        confinement,
        git_watch,
    })
}

/// Landlock-only mode (no namespace can be made here): the rules that let the command read and
/// write only where it may, computed from the workspace's plan so that no secret, nothing of
/// `.toolgate` and nothing of `$HOME` but the toolchain homes is covered. Split directories
/// may be listed (names, never contents): without that, `ls` or a glob at the workspace root
/// would fail.
#[cfg(target_os = "linux")]
fn landlock_only_rules(
    host: &ExecHost,
    dirs: &confine::CallDirs,
    env: &[(String, String)],
    path_dirs: &[PathBuf],
    read_only: bool,
) -> Result<(confine::ReadRules, u32), ExecError> {
    let plan = host.view_plan()?;
    let hidden = plan.secret_files.len()
        + plan.secret_dirs.len()
        + confine::SYSTEM_SECRETS
            .iter()
            .filter(|p| Path::new(p).symlink_metadata().is_ok())
            .count();
    let home = env
        .iter()
        .find(|(k, _)| k == "HOME")
        .map(|(_, v)| PathBuf::from(v));
    confine::read_rules(&confine::ReadInputs {
        workspace: &host.workspace,
        plan: &plan,
        tmp: &dirs.tmp(),
        private_home: &dirs.path().join("home"),
        home: home.as_deref(),
        path_dirs,
        extra_read: &host.config.read,
        extra_write: &host.config.write,
        read_only,
        list_split_dirs: true,
    })
    .map(|rules| (rules, u32::try_from(hidden).unwrap_or(u32::MAX)))
    .map_err(ExecError::Confine)
}

/// PATH entries a command may use: absolute, existing, and not inside the workspace (a file the
/// model wrote must never run under another program's name).
pub fn clean_path(path: &str, workspace: &Path) -> Vec<PathBuf> {
    clean_path_resolved(path, workspace)
        .into_iter()
        .map(|(p, _)| p)
        .collect()
}

/// [`clean_path`], each entry with where it really is (symlinks resolved), which the view
/// binds. An entry written inside the workspace is dropped even when it resolves outside it
/// (a symlink there is the model's to change). So what is left can only change by the host's
/// own hand, and the answer is kept for a few seconds per PATH and workspace: resolving a
/// dozen directories costs a command ~70 µs.
pub fn clean_path_resolved(path: &str, workspace: &Path) -> Vec<(PathBuf, PathBuf)> {
    type Kept = Option<(String, PathBuf, Instant, Vec<(PathBuf, PathBuf)>)>;
    static KEPT: Mutex<Kept> = Mutex::new(None);
    const AGE: Duration = Duration::from_secs(10);
    let mut kept = KEPT.lock().unwrap_or_else(|p| p.into_inner());
    if let Some((p, w, at, dirs)) = kept.as_ref() {
        if p == path && w == workspace && at.elapsed() < AGE {
            return dirs.clone();
        }
    }
    let dirs: Vec<(PathBuf, PathBuf)> = path
        .split(':')
        .filter(|e| e.starts_with('/'))
        .filter_map(|e| {
            let p = PathBuf::from(e);
            if p.starts_with(workspace) {
                return None;
            }
            let canon = p.canonicalize().ok()?;
            (canon.is_dir() && !canon.starts_with(workspace)).then_some((p, canon))
        })
        .collect();
    *kept = Some((
        path.to_string(),
        workspace.to_path_buf(),
        Instant::now(),
        dirs.clone(),
    ));
    dirs
}

/// Find `program` (a bare name) on `dirs`.
pub fn lookup(program: &str, dirs: &[PathBuf]) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    dirs.iter().map(|d| d.join(program)).find(|p| {
        p.metadata()
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    })
}

#[cfg(all(test, unix))]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::path::PathBuf;

    /// A PATH entry spelled inside the workspace is the model's to redirect (a symlink there
    /// can be changed between the check and the use): never used, wherever it leads now.
    #[test]
    fn a_path_entry_inside_the_workspace_is_dropped_even_when_it_leads_out() {
        let ws = tempfile::tempdir().unwrap();
        let ws = ws.path().canonicalize().unwrap();
        std::os::unix::fs::symlink("/usr/bin", ws.join("tools")).unwrap();
        std::fs::create_dir(ws.join("bin")).unwrap();
        let path = format!("{0}/tools:{0}/bin:/usr/bin", ws.display());
        assert_eq!(
            super::clean_path(&path, &ws),
            vec![PathBuf::from("/usr/bin")]
        );
    }
}
