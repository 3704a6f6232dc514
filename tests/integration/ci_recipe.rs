//! The README's CI recipe works unchanged for an ordinary runner user: the `run:` steps of the
//! "## CI recipe" section's workflow, read from README.md as written (so the two cannot drift
//! apart silently), run with `bash -e -o pipefail -c` as uid 65534 in a repository of its
//! own, while `cargo test --workspace` itself runs as root.
//!
//! Only the doctor step's `sudo sysctl …` line is left out (tests never change sysctls); the
//! `uses:` steps and `cargo install` are the runner's business (the `toolgate` on PATH is the
//! one this build made, and `cargo` is Debian's /usr/bin/cargo, since root's rustup toolchain is
//! out of nobody's reach).

use crate::modes::{self, Mode};
use serde_json::Value;
use std::fs;
use std::os::unix::fs::PermissionsExt as _;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

const TEST: &str = "ci_recipe::the_readme_ci_recipe_works_as_a_non_root_runner_user";
/// `nobody`: the runner user.
const NOBODY: u32 = 65534;
/// The only line of the recipe the test does not run.
const SYSCTL: &str = "sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0 || true";
const DOCTOR: &str = "toolgate --preset ci doctor";
const GATE_STEP: &str = "Run tools through the gate";
const EXPORT_STEP: &str = "Export the audit";
/// What the workflow's `${{ … }}` expressions are on a push to the repository itself.
const PUSH: [(&str, &str); 2] = [
    ("github.run_id", "4242"),
    (
        "(github.event_name != 'pull_request' || github.event.pull_request.head.repo.full_name == github.repository) && '1' || '0'",
        "1",
    ),
];
/// The session the gate step's env names, with [`PUSH`]'s run id.
const SESSION: &str = "ci-4242";

/// One step (`cargo test` of a tiny crate, confined, on two shared cores included).
const STEP_DEADLINE: Duration = Duration::from_secs(10 * 60);
/// `git init`, the user-namespace probe.
const SHORT_DEADLINE: Duration = Duration::from_secs(60);
/// install-system-cargo.sh (apt-get, when Debian's cargo is missing).
const INSTALL_DEADLINE: Duration = Duration::from_secs(20 * 60);

const DECISIONS: &str = "# Decisions\n\nTools run through the gate.\n";
const CARGO_TOML: &str =
    "[package]\nname = \"recipe-check\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[workspace]\n";
const LIB_PASSES: &str = "pub fn add(a: u32, b: u32) -> u32 {\n    a + b\n}\n\n#[cfg(test)]\nmod t {\n    #[test]\n    fn adds() {\n        assert_eq!(super::add(2, 2), 4);\n    }\n}\n";
const LIB_FAILS: &str = "pub fn add(a: u32, b: u32) -> u32 {\n    a + b\n}\n\n#[cfg(test)]\nmod t {\n    #[test]\n    fn adds() {\n        assert!(false, \"meant to fail\");\n    }\n}\n";

#[test]
fn the_readme_ci_recipe_works_as_a_non_root_runner_user() {
    // The README first: a recipe that drifted fails wherever the test runs.
    let readme = Path::new(env!("CARGO_MANIFEST_DIR")).join("../README.md");
    let text = fs::read_to_string(&readme)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", readme.display()));
    let recipe = Recipe::from_readme(&text);

    if !rustix::process::geteuid().is_root() {
        return modes::unavailable(
            Mode::Nobody,
            TEST,
            "the tests do not run as root, so they cannot run the recipe as uid 65534",
        );
    }
    let Some(setpriv) = modes::which("setpriv") else {
        return modes::unavailable(
            Mode::Nobody,
            TEST,
            "util-linux's setpriv is not installed (Debian: apt-get install util-linux)",
        );
    };
    let began = Instant::now();
    if let Err(why) = system_cargo() {
        return modes::unavailable(
            Mode::Nobody,
            TEST,
            &format!("no cargo uid 65534 can run: {why}"),
        );
    }
    let installed = began.elapsed();
    let run = Runner::new(setpriv);
    let probe = run.nobody("unshare", &["unshare", "-Ur", "true"], &[], SHORT_DEADLINE);
    if !probe.status.success() {
        return modes::unavailable(
            Mode::Nobody,
            TEST,
            &format!(
                "uid 65534 cannot make a user namespace here (`unshare -Ur true` {}: {}), which \
                 `--preset ci` needs for the shell (the recipe's sysctl line is what lifts \
                 Ubuntu's restriction, and tests never change sysctls)",
                probe.status,
                probe.output.trim()
            ),
        );
    }
    let repo = run.repository();
    let set_up = began.elapsed();

    let doctor = run.step("doctor", &recipe.doctor, &[], &repo);
    doctor.assert_exit(Some(0));
    let gate = run.step(GATE_STEP, &recipe.gate, &recipe.gate_env, &repo);
    gate.assert_exit(Some(0));
    assert!(
        gate.output.contains("test t::adds ... ok"),
        "the gate step did not run the crate's test:\n{}",
        gate.output
    );
    let edit = &recipe.edit;
    let path = edit["path"].as_str().expect("the edit's path");
    let (old, new) = (
        edit["old_string"].as_str().expect("the edit's old_string"),
        edit["new_string"].as_str().expect("the edit's new_string"),
    );
    assert_eq!(path, "docs/decisions.md", "the recipe edits another file");
    let edited = DECISIONS.replacen(old, new, 1);
    assert_ne!(edited, DECISIONS, "the recipe's edit changes nothing");
    assert_eq!(
        fs::read_to_string(repo.join(path)).expect("docs/decisions.md"),
        edited,
        "the recipe's edit was not made:\n{}",
        gate.output
    );
    assert!(
        !repo.join(".github/x.yml").exists(),
        "the denied write was made"
    );

    let export = run.step(EXPORT_STEP, &recipe.export, &[], &repo);
    export.assert_exit(Some(0));
    let audit = fs::read_to_string(repo.join(&recipe.export_file)).expect("the exported audit");
    assert_audit_names_the_shell_call(&audit);

    // A failing test fails the step (on a fresh docs/decisions.md, as on a new checkout).
    run.write(&repo.join("src/lib.rs"), LIB_FAILS);
    run.write(&repo.join(path), DECISIONS);
    let failing = run.step(GATE_STEP, &recipe.gate, &recipe.gate_env, &repo);
    failing.assert_exit(Some(1));
    assert!(
        failing.output.contains("test t::adds ... FAILED")
            && failing.output.contains("meant to fail"),
        "the failing step's output does not name the failing test:\n{}",
        failing.output
    );
    // The step got as far as the shell: the commands before it ran again.
    assert_eq!(fs::read_to_string(repo.join(path)).unwrap(), edited);

    eprintln!(
        "{TEST}: setup {:.1} s (cargo {:.1} s), doctor {:.1} s, gate {:.1} s, export {:.1} s, \
         failing gate {:.1} s",
        set_up.as_secs_f64(),
        installed.as_secs_f64(),
        doctor.took.as_secs_f64(),
        gate.took.as_secs_f64(),
        export.took.as_secs_f64(),
        failing.took.as_secs_f64()
    );
}

/// Every line is a JSON object, and the `cargo test` shell call of the gate step's session is
/// there from intent to completion.
fn assert_audit_names_the_shell_call(audit: &str) {
    assert!(!audit.trim().is_empty(), "the exported audit is empty");
    let events: Vec<Value> = audit
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l)
                .ok()
                .filter(Value::is_object)
                .unwrap_or_else(|| panic!("not a JSON object line: {l:?}\n{audit}"))
        })
        .collect();
    let shell = |event: &str| {
        events.iter().any(|e| {
            e["tool"] == "shell"
                && e["session"] == SESSION
                && e["event"] == event
                && (event != "intent" || e["detail"].to_string().contains("cargo test --offline"))
        })
    };
    for event in ["intent", "decision", "completed"] {
        assert!(
            shell(event),
            "the audit has no `{event}` of the shell call in session {SESSION}:\n{audit}"
        );
    }
}

/// The parts of the README's recipe the test runs.
struct Recipe {
    /// The doctor step's text without the sysctl line.
    doctor: String,
    gate: String,
    /// The gate step's env, its expressions evaluated as on a push.
    gate_env: Vec<(String, String)>,
    /// The input of the gate step's `call edit`.
    edit: Value,
    export: String,
    /// Where the export step writes the audit (relative to the checkout).
    export_file: String,
}

impl Recipe {
    fn from_readme(readme: &str) -> Recipe {
        let yaml = recipe_yaml(readme);
        let steps = steps(&yaml);
        let one = |what: &str, pick: fn(&Step) -> bool| only(&steps, &yaml, what, pick);
        let doctor = one("doctor", |s| {
            s.run.as_deref().is_some_and(|r| r.contains(DOCTOR))
        });
        let gate = one(GATE_STEP, |s| s.name.as_deref() == Some(GATE_STEP));
        let export = one(EXPORT_STEP, |s| s.name.as_deref() == Some(EXPORT_STEP));
        for s in [doctor, export] {
            assert!(
                s.env.is_empty(),
                "step `{}` has an env the test does not set",
                s.line
            );
        }

        let doctor_run = doctor.run.clone().unwrap();
        assert!(doctor.block, "the doctor step is not a `run: |` block");
        let (dropped, kept): (Vec<&str>, Vec<&str>) = doctor_run
            .lines()
            .partition(|l| l.contains("sudo") || l.contains("sysctl"));
        assert_eq!(
            dropped,
            [SYSCTL],
            "the only line the test leaves out of the doctor step is the sysctl"
        );
        assert!(kept.iter().any(|l| l.trim() == DOCTOR), "{doctor_run}");
        let doctor_run = kept.iter().map(|l| format!("{l}\n")).collect();

        assert!(gate.block, "the gate step is not a `run: |` block");
        let gate_run = gate.run.clone().unwrap();
        let names: Vec<&str> = gate.env.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(
            names,
            ["TOOLGATE_SESSION", "TOOLGATE_TRUST_WORKSPACE"],
            "the gate step's env"
        );
        let gate_env: Vec<(String, String)> = gate
            .env
            .iter()
            .map(|(k, v)| (k.clone(), evaluate(v)))
            .collect();
        assert_eq!(
            gate_env,
            [
                ("TOOLGATE_SESSION".to_string(), SESSION.to_string()),
                ("TOOLGATE_TRUST_WORKSPACE".to_string(), "1".to_string())
            ]
        );
        let edit = edit_input(&gate_run);

        let export_run = export.run.clone().unwrap();
        let export_file = export_run
            .strip_prefix("toolgate audit --json >")
            .map(|f| f.trim().to_string())
            .unwrap_or_else(|| {
                panic!("the export step is not `toolgate audit --json > FILE`: {export_run:?}")
            });
        assert!(!export_file.is_empty() && !export_file.contains(' '));
        Recipe {
            doctor: doctor_run,
            gate: gate_run,
            gate_env,
            edit,
            export: export_run,
            export_file,
        }
    }
}

/// The one step `pick` chooses.
fn only<'a>(steps: &'a [Step], yaml: &[&str], what: &str, pick: fn(&Step) -> bool) -> &'a Step {
    let found: Vec<&Step> = steps.iter().filter(|s| pick(s)).collect();
    assert_eq!(
        found.len(),
        1,
        "the README's CI recipe must have exactly one {what} step:\n{}",
        yaml.join("\n")
    );
    found[0]
}

/// The lines of the "## CI recipe" section's ```yaml block.
fn recipe_yaml(readme: &str) -> Vec<&str> {
    let mut lines = readme.lines();
    assert!(
        lines.by_ref().any(|l| l.trim_end() == "## CI recipe"),
        "README.md has no `## CI recipe` section"
    );
    let section: Vec<&str> = lines.take_while(|l| !l.starts_with("## ")).collect();
    let start = section
        .iter()
        .position(|l| l.trim() == "```yaml")
        .expect("the `## CI recipe` section has no ```yaml block")
        + 1;
    let len = section[start..]
        .iter()
        .position(|l| l.trim() == "```")
        .expect("the `## CI recipe` section's ```yaml block is not closed");
    section[start..start + len].to_vec()
}

/// One item of the workflow's `steps:`.
#[derive(Debug, Default)]
struct Step {
    /// Its first line, for messages.
    line: String,
    name: Option<String>,
    run: Option<String>,
    /// Whether `run` is a literal block (`run: |`).
    block: bool,
    env: Vec<(String, String)>,
}

fn indent(l: &str) -> usize {
    l.len() - l.trim_start_matches(' ').len()
}

/// The steps of the workflow's only job: as much YAML as the recipe uses (block sequences of
/// mappings, `key: value`, `key: |` literal blocks, comments).
fn steps(yaml: &[&str]) -> Vec<Step> {
    let at = yaml
        .iter()
        .position(|l| l.trim() == "steps:")
        .expect("the CI recipe has no `steps:`");
    assert!(
        !yaml[..at]
            .iter()
            .any(|l| l.trim_start().starts_with("env:")),
        "the CI recipe sets a workflow or job env the test does not set"
    );
    let rest = &yaml[at + 1..];
    let item = rest
        .iter()
        .find(|l| l.trim_start().starts_with("- "))
        .map(|l| indent(l))
        .expect("the CI recipe has no steps");
    let mut items: Vec<Vec<String>> = Vec::new();
    for l in rest {
        if indent(l) == item && l.trim_start().starts_with("- ") {
            items.push(vec![format!("{}{}", " ".repeat(item + 2), &l[item + 2..])]);
        } else if let Some(current) = items.last_mut() {
            let t = l.trim();
            if !t.is_empty() && !t.starts_with('#') && indent(l) < item {
                break;
            }
            current.push((*l).to_string());
        }
    }
    items.iter().map(|lines| step(lines, item + 2)).collect()
}

fn step(lines: &[String], k: usize) -> Step {
    let mut s = Step {
        line: lines[0].trim().to_string(),
        ..Step::default()
    };
    let mut i = 0;
    while i < lines.len() {
        let l = &lines[i];
        i += 1;
        let t = l.trim();
        if t.is_empty() || t.starts_with('#') {
            continue;
        }
        assert_eq!(indent(l), k, "step `{}`: unexpected line {l:?}", s.line);
        let (key, value) = t
            .split_once(':')
            .unwrap_or_else(|| panic!("step `{}`: not `key: value`: {l:?}", s.line));
        let value = value.trim();
        let start = i;
        while i < lines.len() && (lines[i].trim().is_empty() || indent(&lines[i]) > k) {
            i += 1;
        }
        let nested = &lines[start..i];
        match (key, value) {
            ("run", "|") => {
                s.run = Some(literal(nested));
                s.block = true;
            }
            ("run", v) => {
                assert!(
                    nested.iter().all(|l| l.trim().is_empty()) && !v.contains(" #"),
                    "step `{}`: a `run:` the test cannot read",
                    s.line
                );
                s.run = Some(v.to_string());
            }
            ("name", v) => s.name = Some(v.trim_matches(['"', '\'']).to_string()),
            ("env", "") => {
                s.env = nested
                    .iter()
                    .map(|l| l.trim())
                    .filter(|t| !t.is_empty() && !t.starts_with('#'))
                    .map(|t| {
                        let (k, v) = t
                            .split_once(": ")
                            .unwrap_or_else(|| panic!("an env line the test cannot read: {t:?}"));
                        (k.to_string(), v.trim().to_string())
                    })
                    .collect();
            }
            ("env", v) => panic!("step `{}`: an env the test cannot read: {v:?}", s.line),
            _ => {}
        }
    }
    s
}

/// A literal block scalar (`|`, clip): its lines less their common indentation.
fn literal(lines: &[String]) -> String {
    let at = lines
        .iter()
        .find(|l| !l.trim().is_empty())
        .map(|l| indent(l))
        .expect("an empty `run: |` block");
    let mut text: Vec<&str> = lines
        .iter()
        .map(|l| {
            if l.trim().is_empty() {
                ""
            } else {
                assert!(indent(l) >= at, "a block line left of the block: {l:?}");
                &l[at..]
            }
        })
        .collect();
    while text.last() == Some(&"") {
        text.pop();
    }
    text.join("\n") + "\n"
}

/// `value` with each `${{ expression }}` replaced by what it is on a push ([`PUSH`]).
fn evaluate(value: &str) -> String {
    let mut out = String::new();
    let mut rest = value;
    while let Some(at) = rest.find("${{") {
        out.push_str(&rest[..at]);
        let end = rest[at..]
            .find("}}")
            .unwrap_or_else(|| panic!("an unclosed expression in {value:?}"))
            + at;
        let expression = rest[at + 3..end].trim();
        let (_, v) = PUSH
            .iter()
            .find(|(e, _)| *e == expression)
            .unwrap_or_else(|| panic!("an expression the test does not know: {expression:?}"));
        out.push_str(v);
        rest = &rest[end + 2..];
    }
    out.push_str(rest);
    out
}

/// The JSON input of the gate step's `call edit` (single-quoted, after it).
fn edit_input(gate: &str) -> Value {
    let at = gate
        .find("call edit")
        .expect("the gate step has no `call edit`");
    let start = gate[at..]
        .find("'{")
        .expect("the gate step's `call edit` has no '{…}' input")
        + at
        + 1;
    let end = gate[start..]
        .find("}'")
        .expect("the gate step's edit input is not closed")
        + start
        + 1;
    serde_json::from_str(&gate[start..end]).unwrap_or_else(|e| {
        panic!(
            "the gate step's edit input is not JSON ({e}): {}",
            &gate[start..end]
        )
    })
}

/// install-system-cargo.sh through modes.rs (once per test process, never two apt-gets at
/// once), waited for at most [`INSTALL_DEADLINE`].
fn system_cargo() -> Result<(), String> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(modes::system_cargo(Mode::Nobody));
    });
    rx.recv_timeout(INSTALL_DEADLINE).unwrap_or_else(|_| {
        Err(format!(
            "tests/scripts/install-system-cargo.sh did not finish within {INSTALL_DEADLINE:?}"
        ))
    })
}

/// What one child did.
struct Ran {
    what: String,
    status: ExitStatus,
    /// stdout and stderr, interleaved.
    output: String,
    took: Duration,
}

impl Ran {
    fn assert_exit(&self, code: Option<i32>) {
        assert_eq!(
            self.status.code(),
            code,
            "{} exited {} after {:.1} s:\n{}",
            self.what,
            self.status,
            self.took.as_secs_f64(),
            self.output
        );
    }
}

/// The runner's machine: a directory removed afterwards holding nobody's HOME and TMPDIR, a
/// `bin` with `toolgate` alone, the repository, and the logs.
struct Runner {
    dir: tempfile::TempDir,
    setpriv: PathBuf,
    home: PathBuf,
    tmp: PathBuf,
    bin: PathBuf,
    cache: PathBuf,
}

impl Runner {
    fn new(setpriv: PathBuf) -> Runner {
        let base = std::env::temp_dir();
        let base = if modes::others_can(&base, 0o001) {
            base
        } else {
            PathBuf::from("/tmp")
        };
        let dir = tempfile::Builder::new()
            .prefix("toolgate-ci-recipe-")
            .tempdir_in(&base)
            .unwrap();
        fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o755)).unwrap();
        assert!(
            modes::others_can(dir.path(), 0o001),
            "{} is out of uid 65534's reach",
            dir.path().display()
        );
        let owned = |name: &str| {
            let d = dir.path().join(name);
            fs::create_dir(&d).unwrap();
            std::os::unix::fs::chown(&d, Some(NOBODY), Some(NOBODY)).unwrap();
            fs::set_permissions(&d, fs::Permissions::from_mode(0o700)).unwrap();
            d
        };
        let (home, tmp) = (owned("home"), owned("tmp"));
        let bin = dir.path().join("bin");
        fs::create_dir(&bin).unwrap();
        fs::set_permissions(&bin, fs::Permissions::from_mode(0o755)).unwrap();
        modes::place_executable(&crate::common::toolgate_bin(), &bin.join("toolgate")).unwrap();
        let cache = modes::nobody_cache(dir.path()).unwrap();
        Runner {
            dir,
            setpriv,
            home,
            tmp,
            bin,
            cache,
        }
    }

    /// The repository the recipe acts on, nobody's, with a git directory.
    fn repository(&self) -> PathBuf {
        let repo = self.dir.path().join("repo");
        fs::create_dir(&repo).unwrap();
        std::os::unix::fs::chown(&repo, Some(NOBODY), Some(NOBODY)).unwrap();
        for (rel, text) in [
            (
                "host/src/lib.rs",
                "// TODO: gate every tool\npub fn f() {}\n",
            ),
            ("docs/decisions.md", DECISIONS),
            ("Cargo.toml", CARGO_TOML),
            ("src/lib.rs", LIB_PASSES),
        ] {
            self.write(&repo.join(rel), text);
        }
        self.nobody("git init", &["git", "init", "-q"], &[], SHORT_DEADLINE)
            .assert_exit(Some(0));
        assert!(repo.join(".git").is_dir());
        repo
    }

    /// Write `text` at `path` (and any directory on the way) as nobody's.
    fn write(&self, path: &Path, text: &str) {
        let mut missing = Vec::new();
        let mut up = path.parent();
        while let Some(d) = up.filter(|d| !d.exists()) {
            missing.push(d.to_path_buf());
            up = d.parent();
        }
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, text).unwrap();
        for p in missing.iter().chain([&path.to_path_buf()]) {
            std::os::unix::fs::chown(p, Some(NOBODY), Some(NOBODY)).unwrap();
        }
    }

    /// Run a step's text as the recipe does: `bash -e -o pipefail -c TEXT` in the checkout.
    fn step(&self, name: &str, text: &str, env: &[(String, String)], repo: &Path) -> Ran {
        let mut ran = self.run_in(
            &format!("step `{name}`"),
            &["bash", "-e", "-o", "pipefail", "-c", text],
            env,
            repo,
            STEP_DEADLINE,
        );
        ran.what = format!("step `{name}`:\n{text}\n");
        ran
    }

    fn nobody(
        &self,
        what: &str,
        args: &[&str],
        env: &[(String, String)],
        deadline: Duration,
    ) -> Ran {
        let repo = self.dir.path().join("repo");
        let cwd = if repo.is_dir() {
            repo
        } else {
            self.home.clone()
        };
        self.run_in(what, args, env, &cwd, deadline)
    }

    /// `args` as uid 65534 in `cwd`, with the runner's environment and `env`; killed (its
    /// whole process group) after `deadline`, which fails the test.
    fn run_in(
        &self,
        what: &str,
        args: &[&str],
        env: &[(String, String)],
        cwd: &Path,
        deadline: Duration,
    ) -> Ran {
        static RUNS: AtomicUsize = AtomicUsize::new(0);
        let log_path = self
            .dir
            .path()
            .join(format!("log-{}", RUNS.fetch_add(1, Ordering::Relaxed)));
        let log = fs::File::create(&log_path).unwrap();
        let path = format!("{}:/usr/bin:/bin", self.bin.display());
        let mut cmd = Command::new(&self.setpriv);
        cmd.args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "--inh-caps=-all",
        ])
        .args(args)
        .current_dir(cwd)
        .env_clear()
        .env("PATH", path)
        .env("HOME", &self.home)
        .env("TMPDIR", &self.tmp)
        .env("TOOLGATE_CACHE_DIR", &self.cache)
        // Every GitHub Actions step has it.
        .env("CI", "true")
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .process_group(0);
        let began = Instant::now();
        let mut child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("{what}: cannot start {}: {e}", self.setpriv.display()));
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            if began.elapsed() > deadline {
                let pid =
                    rustix::process::Pid::from_raw(i32::try_from(child.id()).unwrap()).unwrap();
                let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
                let _ = child.wait();
                panic!(
                    "{what} still ran after {deadline:?}, killed:\n{}",
                    String::from_utf8_lossy(&fs::read(&log_path).unwrap_or_default())
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        Ran {
            what: what.to_string(),
            status,
            output: String::from_utf8_lossy(&fs::read(&log_path).unwrap()).into_owned(),
            took: began.elapsed(),
        }
    }
}
