//! The cause chosen for each missing layer, from fake sysctl, LSM and `/proc/self/status`
//! texts: the host's switches in the order they are checked, else the errno and step.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;

const STATUS_NOBODY: &str = "Name:\ttoolgate\nUid:\t65534\t65534\t65534\t65534\nCapEff:\t0000000000000000\nNoNewPrivs:\t0\nSeccomp:\t0\nSeccomp_filters:\t0\n";
const STATUS_DOCKER: &str = "Name:\ttoolgate\nUid:\t0\t0\t0\t0\nCapEff:\t00000000a80425fb\nSeccomp:\t2\nSeccomp_filters:\t1\n";
const STATUS_ROOT: &str = "Uid:\t0\t0\t0\t0\nCapEff:\t000001ffffffffff\nSeccomp:\t0\n";

fn host(status: &str) -> Readings {
    Readings {
        linux: true,
        arch: "x86_64",
        osrelease: Some("6.8.0-45-generic".into()),
        lsm: Some("lockdown,capability,landlock,yama,apparmor".into()),
        apparmor_restrict: None,
        max_user_namespaces: Some("63433\n".into()),
        unprivileged_userns_clone: None,
        status: Some(status.into()),
    }
}

/// A probe that found no user namespace (`errno` at `step`).
fn refused(errno: i32, step: &'static str) -> Probe {
    Probe {
        landlock_abi: 6,
        seccomp: true,
        mode: NsMode::LandlockOnly,
        direct_errno: Some(1),
        userns_errno: Some(errno),
        userns_step: Some(step),
        ..Probe::default()
    }
}

fn cause(p: &Probe, r: &Readings) -> String {
    userns_refusal_in(p, r).unwrap().cause
}

#[test]
fn apparmor_restriction_is_named_first_with_its_sysctl_and_profile_fix() {
    let mut r = host(STATUS_DOCKER);
    r.apparmor_restrict = Some("1\n".into());
    r.max_user_namespaces = Some("0\n".into());
    r.unprivileged_userns_clone = Some("0\n".into());
    let c = userns_refusal_in(&refused(1, "user namespace"), &r).unwrap();
    assert_eq!(
        c.cause,
        "unprivileged user namespaces are restricted by AppArmor (kernel.apparmor_restrict_unprivileged_userns=1)"
    );
    assert!(c
        .fix
        .contains("sysctl kernel.apparmor_restrict_unprivileged_userns=0"));
    assert!(c.fix.contains("`userns,`"));
}

#[test]
fn each_switch_is_named_when_the_ones_before_it_are_off() {
    let p = refused(1, "user namespace");
    let mut r = host(STATUS_DOCKER);
    r.apparmor_restrict = Some("0\n".into());
    r.max_user_namespaces = Some("0\n".into());
    r.unprivileged_userns_clone = Some("0\n".into());
    assert!(cause(&p, &r).contains("user.max_user_namespaces=0"));
    r.max_user_namespaces = Some("15000\n".into());
    assert!(cause(&p, &r).contains("kernel.unprivileged_userns_clone=0"));
    r.unprivileged_userns_clone = Some("1\n".into());
    let c = userns_refusal_in(&p, &r).unwrap();
    assert!(
        c.cause
            .starts_with("this process runs under a seccomp filter"),
        "{}",
        c.cause
    );
    assert!(c.cause.contains("Docker's default profile"));
    assert!(c.fix.contains("--security-opt seccomp=unconfined"));
    assert!(c.fix.contains("CAP_SYS_ADMIN"));
}

#[test]
fn without_a_known_switch_the_errno_and_step_are_named() {
    let r = host(STATUS_NOBODY);
    let c = cause(&refused(13, "user namespace"), &r);
    assert!(c.contains("EACCES 13 (Permission denied)"), "{c}");
    assert!(c.contains("unshare(CLONE_NEWUSER)"), "{c}");
    let c = cause(&refused(28, "user namespace"), &r);
    assert!(
        c.contains("ENOSPC") && c.contains("limit of user namespaces"),
        "{c}"
    );
    let c = cause(&refused(1, "namespaces inside the user namespace"), &r);
    assert!(
        c.starts_with("a user namespace can be made, but making the namespaces inside the user namespace failed with EPERM 1"),
        "{c}"
    );
}

#[test]
fn no_refusal_when_namespaces_can_be_made() {
    let r = host(STATUS_DOCKER);
    let privileged = Probe {
        landlock_abi: 6,
        mode: NsMode::Privileged,
        ..Probe::default()
    };
    assert_eq!(userns_refusal_in(&privileged, &r), None);
    let userns = Probe {
        mode: NsMode::UserNamespace,
        direct_errno: Some(1),
        ..privileged
    };
    assert_eq!(userns_refusal_in(&userns, &r), None);
}

#[test]
fn a_partly_privileged_process_is_told_both_halves() {
    let mut r = host(STATUS_NOBODY);
    r.max_user_namespaces = Some("0".into());
    let p = Probe {
        mode: NsMode::Privileged,
        netns: true,
        ..refused(1, "user namespace")
    };
    let c = namespace_cause(&p, &r);
    assert!(
        c.cause.starts_with(
            "this process may make only some namespaces itself (making all failed with EPERM 1"
        ),
        "{}",
        c.cause
    );
    assert!(
        c.cause.ends_with("user.max_user_namespaces=0)"),
        "{}",
        c.cause
    );
}

#[test]
fn landlock_causes_read_the_active_lsms_and_the_kernel() {
    let mut r = host(STATUS_NOBODY);
    r.lsm = Some("lockdown,capability,yama,apparmor\n".into());
    let c = landlock_cause(&r);
    assert!(
        c.cause.contains("`lockdown,capability,yama,apparmor`"),
        "{}",
        c.cause
    );
    assert!(
        c.fix
            .contains("lsm=lockdown,capability,yama,apparmor,landlock"),
        "{}",
        c.fix
    );
    r.lsm = Some("landlock,yama".into());
    r.osrelease = Some("6.1.0-13-amd64".into());
    assert!(landlock_cause(&r)
        .cause
        .contains("Linux 6.1.0-13-amd64's Landlock is older than ABI 3"));
    r.lsm = None;
    r.osrelease = Some("5.10.0".into());
    assert!(landlock_cause(&r).cause.contains("predates Landlock"));
    r.osrelease = Some("6.8.0".into());
    assert!(landlock_cause(&r)
        .cause
        .contains("without `landlock` in `lsm=`"));
}

#[test]
fn missing_scopes_name_abi_6_or_the_missing_landlock() {
    let r = host(STATUS_NOBODY);
    let p = Probe {
        landlock_abi: 3,
        ..Probe::default()
    };
    let c = scopes_cause(&p, &r);
    assert!(
        c.cause.contains("older than ABI 6 (Linux 6.12)"),
        "{}",
        c.cause
    );
    assert_eq!(c.fix, "a Linux ≥ 6.12 kernel");
    let none = Probe::default();
    assert!(scopes_cause(&none, &r)
        .cause
        .starts_with("no Landlock at all"));
}

#[test]
fn seccomp_cause_names_the_architecture() {
    let mut r = host(STATUS_NOBODY);
    r.arch = "powerpc64";
    assert!(seccomp_cause(&r)
        .cause
        .ends_with("could not be built for powerpc64"));
}

#[test]
fn the_hint_names_each_cause_once_with_its_layers() {
    let mut r = host(STATUS_NOBODY);
    r.apparmor_restrict = Some("1".into());
    let p = refused(1, "user namespace");
    let missing = [
        "network namespace",
        "mount namespace",
        "minimal filesystem view",
        "PID namespace",
    ];
    let text = hint_text(&causes_in(&missing, &p, &r));
    assert!(
        text.starts_with("network namespace, mount namespace, minimal filesystem view, PID namespace: unprivileged user namespaces are restricted by AppArmor"),
        "{text}"
    );
    assert_eq!(text.matches("AppArmor (kernel").count(), 1, "{text}");
    assert!(text.contains("`toolgate doctor`"));
    assert!(text.ends_with("drop `require_confinement` from the policy"));
}

#[test]
fn not_linux_is_the_cause_of_everything() {
    let r = Readings::default();
    for layer in [
        "landlock",
        "PID namespace",
        "dropping capabilities",
        "seccomp filter",
    ] {
        assert!(
            cause_of(layer, &Probe::default(), &r)
                .cause
                .contains("not Linux"),
            "{layer}"
        );
    }
}

/// What `available` gives in landlock-only mode.
fn landlock_only() -> Confinement {
    Confinement {
        landlock: true,
        scopes: true,
        caps_dropped: true,
        seccomp: true,
        env_scrubbed: true,
        mode: NsMode::LandlockOnly,
        ..Confinement::default()
    }
}

#[test]
fn the_report_names_every_layer_and_refuses_the_shell_only_when_required() {
    let mut r = host(STATUS_NOBODY);
    r.unprivileged_userns_clone = Some("0".into());
    let p = refused(1, "user namespace");
    let bound = ProcessBound::RlimitNprocUser;
    let report = HostReport::from_facts(&landlock_only(), &p, &r, bound, true);
    let names: Vec<&str> = report.layers.iter().map(|l| l.name).collect();
    assert_eq!(
        names,
        [
            "landlock",
            "landlock scopes (signals, abstract sockets)",
            "user namespace",
            "mount namespace",
            "minimal filesystem view",
            "PID namespace",
            "network namespace",
            "dropping capabilities",
            "seccomp filter",
            "no_new_privs",
            "environment scrubbing",
            "process limit",
        ]
    );
    assert!(report.refuses_shell);
    assert!(report
        .shell
        .starts_with("refused: the policy sets `[shell] require_confinement`"));
    assert_eq!(
        (report.uid, report.euid, report.cap_sys_admin),
        (Some(65534), Some(65534), false)
    );
    let pid = report
        .layers
        .iter()
        .find(|l| l.name == "PID namespace")
        .unwrap();
    assert_eq!(pid.state, "no");
    assert!(pid
        .cause
        .as_ref()
        .unwrap()
        .cause
        .contains("unprivileged_userns_clone=0"));
    let limit = report
        .layers
        .iter()
        .find(|l| l.name == "process limit")
        .unwrap();
    assert_eq!((limit.state, limit.cause.is_none()), ("yes", true));
    assert!(limit.detail.starts_with("rlimit-nproc-user: "));
    let text = report.render();
    assert!(text.contains("mode     landlock-only"), "{text}");
    let v = report.to_json();
    assert_eq!(v["mode"], "landlock-only");
    assert_eq!(v["refuses_shell"], true);
    assert_eq!(v["layers"][5]["state"], "no");
    assert!(v["layers"][5]["fix"]
        .as_str()
        .unwrap()
        .contains("unprivileged_userns_clone=1"));
    assert!(v["layers"][0].get("cause").is_none());
    assert_eq!(v["process_limit"], "rlimit-nproc-user");

    let relaxed = HostReport::from_facts(&landlock_only(), &p, &r, bound, false);
    assert!(!relaxed.refuses_shell);
    assert!(relaxed
        .shell
        .starts_with("runs confined in mode landlock-only without "));
}

#[test]
fn a_privileged_root_host_has_every_layer() {
    let r = host(STATUS_ROOT);
    let p = Probe {
        landlock_abi: 6,
        netns: true,
        mountns: true,
        pidns: true,
        seccomp: true,
        ..Probe::default()
    };
    let c = Confinement {
        netns: true,
        mountns: true,
        view: true,
        pidns: true,
        mode: NsMode::Privileged,
        ..landlock_only()
    };
    let report = HostReport::from_facts(&c, &p, &r, ProcessBound::Cgroup, true);
    assert!(!report.refuses_shell);
    assert!(report.cap_sys_admin && report.cap_setpcap);
    assert!(report.layers.iter().all(|l| l.cause.is_none()));
    let user = report
        .layers
        .iter()
        .find(|l| l.name == "user namespace")
        .unwrap();
    assert_eq!(user.state, "not-needed");
    assert_eq!(report.to_json()["process_limit"], "cgroup");
}

#[test]
fn root_without_setpcap_and_namespaces_is_told_why_capabilities_stay() {
    let r = host(STATUS_ROOT);
    let c = cause_of("dropping capabilities", &refused(1, "user namespace"), &r);
    assert!(
        c.cause
            .starts_with("this process is root without CAP_SETPCAP"),
        "{}",
        c.cause
    );
    assert!(c.fix.contains("CAP_SETPCAP"));
}

#[test]
fn root_without_a_pids_cgroup_is_told_rlimit_does_not_bound_it() {
    let c = process_limit_cause(NsMode::Privileged, Some(0));
    assert!(c.cause.contains("no writable pids cgroup"));
    assert!(c.fix.contains("systemd-run --user --scope -p Delegate=yes"));
    assert!(c.cause.ends_with("RLIMIT_NPROC does not bound root"));
}
