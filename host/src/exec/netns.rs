//! A network namespace of one command's own, whose only way out is the host's egress proxy.
//!
//! A host thread moves itself to a fresh network namespace, raises `lo` there, binds a TCP
//! listener on `127.0.0.1` inside it and keeps a descriptor of the namespace; then it exits.
//! The listener stays in that namespace (a socket belongs to the namespace it was made in), so
//! the host serves it from any thread while the command, which joins the namespace with
//! `setns` before it execs, can reach nothing but `127.0.0.1:PORT`: no other interface, no
//! route. The proxy behind the listener connects out from the host's own namespace, after it
//! judged the destination.

use super::ExecError;
use rustix::fd::OwnedFd;
use std::any::Any;
use std::sync::Arc;

/// What the command's network is: its namespace, the proxy's port inside it, and whatever
/// keeps the proxy running (dropped with the last holder: the call, or the background job).
#[derive(Clone)]
pub struct CommandNet {
    /// The namespace the command joins.
    pub ns: Arc<OwnedFd>,
    /// The user namespace that owns it, joined first (a host that is not privileged).
    pub user: Option<Arc<OwnedFd>>,
    /// The proxy's port on `127.0.0.1` inside it.
    pub port: u16,
    /// Keeps the proxy serving while the command may still use it.
    pub keep: Arc<dyn Any + Send + Sync>,
}

impl std::fmt::Debug for CommandNet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CommandNet")
            .field("port", &self.port)
            .finish()
    }
}

impl PartialEq for CommandNet {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.ns, &other.ns) && self.port == other.port
    }
}

impl Eq for CommandNet {}

impl CommandNet {
    /// Copies of the namespaces' descriptors, for the process that starts the command.
    #[cfg(target_os = "linux")]
    pub fn namespaces(&self) -> std::io::Result<crate::exec::confine::CommandNs> {
        Ok(crate::exec::confine::CommandNs {
            net: self.ns.try_clone()?,
            user: self.user.as_deref().map(OwnedFd::try_clone).transpose()?,
        })
    }

    /// The environment that points every common client at the proxy: the `*_PROXY` variables
    /// (both cases), npm's, cargo's and pip's own, and git's `http.proxy` through
    /// `GIT_CONFIG_*` (appended after the entries `env` already has).
    pub fn proxy_env(&self, env: &mut Vec<(String, String)>) {
        let url = format!("http://127.0.0.1:{}", self.port);
        let set = |env: &mut Vec<(String, String)>, k: &str, v: &str| {
            env.retain(|(name, _)| name != k);
            env.push((k.to_string(), v.to_string()));
        };
        for k in [
            "HTTP_PROXY",
            "HTTPS_PROXY",
            "ALL_PROXY",
            "http_proxy",
            "https_proxy",
            "all_proxy",
            "npm_config_proxy",
            "npm_config_https_proxy",
            "CARGO_HTTP_PROXY",
            "PIP_PROXY",
        ] {
            set(env, k, &url);
        }
        // Nothing bypasses the proxy: there is no other way out of the namespace anyway, and a
        // client that went direct would only fail without saying why.
        set(env, "NO_PROXY", "");
        set(env, "no_proxy", "");
        let count = env
            .iter()
            .find(|(k, _)| k == "GIT_CONFIG_COUNT")
            .and_then(|(_, v)| v.parse::<usize>().ok())
            .unwrap_or(0);
        set(env, &format!("GIT_CONFIG_KEY_{count}"), "http.proxy");
        set(env, &format!("GIT_CONFIG_VALUE_{count}"), &url);
        set(env, "GIT_CONFIG_COUNT", &(count + 1).to_string());
    }
}

/// A fresh network namespace with `lo` up and a listener on `127.0.0.1:0` inside it, and,
/// on a host that is not privileged, the user namespace that owns it (the command joins that
/// first: only there may it enter the network namespace).
#[cfg(target_os = "linux")]
pub fn create() -> Result<(OwnedFd, Option<OwnedFd>, std::net::TcpListener), ExecError> {
    if crate::exec::confine::probe().mode == crate::exec::confine::NsMode::UserNamespace {
        let (user, ns, listener) = create_in_user_namespace()?;
        listener
            .set_nonblocking(true)
            .map_err(ExecError::io("preparing the proxy's listener"))?;
        return Ok((ns, Some(user), listener));
    }
    std::thread::spawn(
        || -> Result<(OwnedFd, Option<OwnedFd>, std::net::TcpListener), ExecError> {
            // SAFETY: only this short-lived thread moves to the new namespace; it shares no file
            // table or filesystem context change (no CLONE_FILES/FS) and exits right after.
            #[allow(unsafe_code)]
            unsafe { rustix::thread::unshare_unsafe(rustix::thread::UnshareFlags::NEWNET) }
                .map_err(|e| ExecError::Io {
                    what: "creating the command's network namespace",
                    error: e.into(),
                })?;
            raise_loopback().map_err(ExecError::io("raising the command's loopback interface"))?;
            let ns = std::fs::File::open("/proc/thread-self/ns/net")
                .map_err(ExecError::io("opening the command's network namespace"))?;
            let listener = std::net::TcpListener::bind(("127.0.0.1", 0)).map_err(ExecError::io(
                "binding the proxy inside the command's namespace",
            ))?;
            listener
                .set_nonblocking(true)
                .map_err(ExecError::io("preparing the proxy's listener"))?;
            Ok((OwnedFd::from(ns), None, listener))
        },
    )
    .join()
    .map_err(|_| ExecError::NamespaceThread)?
}

/// [`create`] for a host that is not privileged. A thread of a multi-threaded process may not
/// make a user namespace, so a child is cloned into a new user and network namespace: it
/// maps the caller to itself, raises `lo`, binds the listener, sends the three descriptors
/// (user namespace, network namespace, listener) back over a socket pair and exits. The
/// namespaces live on through the descriptors.
#[cfg(target_os = "linux")]
fn create_in_user_namespace() -> Result<(OwnedFd, OwnedFd, std::net::TcpListener), ExecError> {
    use rustix::net::{
        recvmsg, sendmsg, socketpair, AddressFamily, RecvAncillaryBuffer, RecvAncillaryMessage,
        RecvFlags, SendAncillaryBuffer, SendAncillaryMessage, SendFlags, SocketFlags, SocketType,
    };
    use std::mem::MaybeUninit;
    let fail = |what: &'static str| {
        move |e: rustix::io::Errno| ExecError::Io {
            what,
            error: e.into(),
        }
    };
    let maps = crate::exec::confine::UserMaps::of_caller();
    let (ours, theirs) = socketpair(
        AddressFamily::UNIX,
        SocketType::SEQPACKET,
        SocketFlags::CLOEXEC,
        None,
    )
    .map_err(fail(
        "making the socket for the command's network namespace",
    ))?;
    let flags = libc::SIGCHLD | libc::CLONE_NEWUSER | libc::CLONE_NEWNET;
    // SAFETY: clone without CLONE_VM behaves as fork into the new namespaces; the child runs
    // `in_child` on a copy of this stack, which makes only system calls on values made here,
    // and exits.
    #[allow(unsafe_code)]
    let pid = unsafe { libc::syscall(libc::SYS_clone, flags as libc::c_long, 0, 0, 0, 0) };
    if pid < 0 {
        return Err(ExecError::Io {
            what: "creating the command's user and network namespaces",
            error: std::io::Error::last_os_error(),
        });
    }
    if pid == 0 {
        let in_child = || -> std::io::Result<()> {
            maps.write_self()?;
            raise_loopback()?;
            let listener = rustix::net::socket_with(
                AddressFamily::INET,
                SocketType::STREAM,
                rustix::net::SocketFlags::CLOEXEC,
                None,
            )?;
            rustix::net::bind(
                &listener,
                &std::net::SocketAddrV4::new(std::net::Ipv4Addr::LOCALHOST, 0),
            )?;
            rustix::net::listen(&listener, 128)?;
            let open = |p: &std::ffi::CStr| {
                rustix::fs::open(
                    p,
                    rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::CLOEXEC,
                    rustix::fs::Mode::empty(),
                )
            };
            let user = open(c"/proc/self/ns/user")?;
            let net = open(c"/proc/self/ns/net")?;
            let fds = [
                rustix::fd::AsFd::as_fd(&user),
                rustix::fd::AsFd::as_fd(&net),
                rustix::fd::AsFd::as_fd(&listener),
            ];
            let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(3))];
            let mut control = SendAncillaryBuffer::new(&mut space);
            control.push(SendAncillaryMessage::ScmRights(&fds));
            sendmsg(
                &theirs,
                &[std::io::IoSlice::new(b"ns")],
                &mut control,
                SendFlags::NOSIGNAL,
            )?;
            Ok(())
        };
        let code = match in_child() {
            Ok(()) => 0,
            Err(e) => e.raw_os_error().unwrap_or(libc::EPERM),
        };
        // SAFETY: the cloned child ends here without running anything of the parent's.
        #[allow(unsafe_code)]
        unsafe {
            libc::_exit(code)
        }
    }
    drop(theirs);
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(3))];
    let mut control = RecvAncillaryBuffer::new(&mut space);
    let mut buf = [0u8; 8];
    let got = loop {
        match recvmsg(
            &ours,
            &mut [std::io::IoSliceMut::new(&mut buf)],
            &mut control,
            RecvFlags::CMSG_CLOEXEC,
        ) {
            Err(rustix::io::Errno::INTR) => continue,
            other => break other,
        }
    };
    let mut fds: Vec<OwnedFd> = Vec::new();
    for msg in control.drain() {
        if let RecvAncillaryMessage::ScmRights(received) = msg {
            fds.extend(received);
        }
    }
    let mut status: libc::c_int = 0;
    // SAFETY: reaping our own child into a local.
    #[allow(unsafe_code)]
    while unsafe { libc::waitpid(pid as libc::pid_t, &mut status, 0) } < 0 {
        if std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
            break;
        }
    }
    got.map_err(fail("receiving the command's network namespace"))?;
    let mut fds = fds.into_iter();
    match (fds.next(), fds.next(), fds.next()) {
        (Some(user), Some(net), Some(listener)) => {
            Ok((user, net, std::net::TcpListener::from(listener)))
        }
        _ => Err(ExecError::Io {
            what: "creating the command's user and network namespaces",
            error: std::io::Error::from_raw_os_error(if libc::WIFEXITED(status) {
                libc::WEXITSTATUS(status).max(1)
            } else {
                libc::EPERM
            }),
        }),
    }
}

/// Not available off Linux: commands there get no network namespace at all.
#[cfg(not(target_os = "linux"))]
pub fn create() -> Result<(OwnedFd, Option<OwnedFd>, std::net::TcpListener), ExecError> {
    Err(ExecError::NeedsLinux {
        what: "a network namespace per command",
    })
}

/// `ip link set lo up` in the calling thread's network namespace.
#[cfg(target_os = "linux")]
fn raise_loopback() -> std::io::Result<()> {
    #[allow(unsafe_code)]
    // SAFETY: a datagram socket and two ioctls on a zeroed `ifreq` naming `lo`; the socket is
    // closed on every path.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0);
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let mut req: libc::ifreq = std::mem::zeroed();
        for (i, b) in b"lo\0".iter().enumerate() {
            req.ifr_name[i] = *b as libc::c_char;
        }
        let result = (|| {
            if libc::ioctl(fd, libc::SIOCGIFFLAGS, &mut req) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            req.ifr_ifru.ifru_flags |= libc::IFF_UP as libc::c_short;
            if libc::ioctl(fd, libc::SIOCSIFFLAGS, &req) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        })();
        libc::close(fd);
        result
    }
}

#[cfg(all(test, target_os = "linux"))]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// The listener is reachable from inside the namespace only: the host's loopback does not
    /// have it.
    #[test]
    fn the_listener_lives_in_the_commands_namespace() {
        let Ok((ns, _user, listener)) = create() else {
            eprintln!("skipped: this process cannot create network namespaces");
            return;
        };
        let port = listener.local_addr().unwrap().port();
        // From the host's namespace the port is someone else's or nothing.
        let from_host = std::net::TcpStream::connect(("127.0.0.1", port));
        if let Ok(s) = &from_host {
            // Another listener on the host's loopback took the same number: not ours.
            listener.set_nonblocking(true).unwrap();
            assert!(
                listener.accept().is_err(),
                "{s:?} reached the namespace's listener"
            );
        }
        // From inside the namespace it is reachable.
        let reached = std::thread::spawn(move || {
            rustix::thread::move_into_link_name_space(
                std::os::fd::AsFd::as_fd(&ns),
                Some(rustix::thread::LinkNameSpaceType::Network),
            )
            .unwrap();
            std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
        })
        .join()
        .unwrap();
        assert!(reached);
    }

    #[test]
    fn the_proxy_environment_points_every_client_at_the_proxy() {
        let Ok((ns, user, _listener)) = create() else {
            eprintln!("skipped: this process cannot create network namespaces");
            return;
        };
        let net = CommandNet {
            ns: Arc::new(ns),
            user: user.map(Arc::new),
            port: 4242,
            keep: Arc::new(()),
        };
        let mut env = vec![
            ("GIT_CONFIG_COUNT".to_string(), "1".to_string()),
            (
                "GIT_CONFIG_KEY_0".to_string(),
                "safe.bareRepository".to_string(),
            ),
            ("GIT_CONFIG_VALUE_0".to_string(), "explicit".to_string()),
            ("NO_PROXY".to_string(), "*".to_string()),
        ];
        net.proxy_env(&mut env);
        let get = |k: &str| env.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
        for k in ["HTTPS_PROXY", "http_proxy", "CARGO_HTTP_PROXY", "PIP_PROXY"] {
            assert_eq!(get(k), Some("http://127.0.0.1:4242"), "{k}");
        }
        assert_eq!(get("NO_PROXY"), Some(""));
        assert_eq!(get("GIT_CONFIG_COUNT"), Some("2"));
        assert_eq!(get("GIT_CONFIG_KEY_0"), Some("safe.bareRepository"));
        assert_eq!(get("GIT_CONFIG_KEY_1"), Some("http.proxy"));
        assert_eq!(get("GIT_CONFIG_VALUE_1"), Some("http://127.0.0.1:4242"));
    }
}
