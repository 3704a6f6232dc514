//! Registry credentials, only from the user's own docker/podman auth files (never from the
//! workspace), and the `WWW-Authenticate` challenges of the token and basic flows.

use base64::Engine;
use std::path::{Path, PathBuf};

/// A user name and password for one registry, and the file they came from.
#[derive(Clone, Debug)]
pub struct Credentials {
    /// The user name.
    pub user: String,
    /// The password or token.
    pub password: String,
    /// The auth file they were read from.
    pub from: PathBuf,
}

impl Credentials {
    /// `Basic base64(user:password)`.
    pub fn basic(&self) -> String {
        let raw = format!("{}:{}", self.user, self.password);
        format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(raw)
        )
    }
}

/// What the search for credentials found: maybe credentials, and notes on every file it
/// looked at (for the message when the registry wants credentials and there are none).
#[derive(Clone, Debug, Default)]
pub struct Lookup {
    /// The first credentials found for the registry.
    pub credentials: Option<Credentials>,
    /// One line per auth file considered.
    pub notes: Vec<String>,
}

/// The auth files, in the order podman reads them: `$REGISTRY_AUTH_FILE`,
/// `$XDG_RUNTIME_DIR/containers/auth.json`, `~/.config/containers/auth.json`, then docker's
/// `$DOCKER_CONFIG/config.json` (else `~/.docker/config.json`).
pub fn auth_files() -> Vec<PathBuf> {
    let var = |k: &str| {
        std::env::var_os(k)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    let home = var("HOME");
    let mut out = Vec::new();
    if let Some(f) = var("REGISTRY_AUTH_FILE") {
        out.push(f);
    }
    if let Some(d) = var("XDG_RUNTIME_DIR") {
        out.push(d.join("containers/auth.json"));
    }
    if let Some(h) = &home {
        out.push(h.join(".config/containers/auth.json"));
    }
    match (var("DOCKER_CONFIG"), &home) {
        (Some(d), _) => out.push(d.join("config.json")),
        (None, Some(h)) => out.push(h.join(".docker/config.json")),
        (None, None) => {}
    }
    out
}

/// Credentials for `registry` from [`auth_files`]; a file inside `workspace` is never read
/// (a repository must not choose the account a plugin is fetched with).
pub fn lookup(registry: &str, workspace: &Path) -> Lookup {
    lookup_in(&auth_files(), registry, workspace)
}

/// [`lookup`] over the given files.
pub fn lookup_in(files: &[PathBuf], registry: &str, workspace: &Path) -> Lookup {
    let mut found = Lookup::default();
    let ws = std::fs::canonicalize(workspace).unwrap_or_else(|_| workspace.to_path_buf());
    for file in files {
        let Ok(real) = std::fs::canonicalize(file) else {
            continue; // does not exist
        };
        if real.starts_with(&ws) {
            found.notes.push(format!(
                "{} ignored: it is inside the workspace, and credentials never come from the workspace",
                file.display()
            ));
            continue;
        }
        match read_entry(&real, registry) {
            Ok(Some(Entry::Basic(user, password))) => {
                found.credentials = Some(Credentials {
                    user,
                    password,
                    from: file.clone(),
                });
                return found;
            }
            Ok(Some(Entry::Helper(helper))) => found.notes.push(format!(
                "{} leaves {registry} to the credential helper `docker-credential-{helper}`, which toolgate does not run; put a plain `auths` entry (`docker login` with no credsStore) in one of the auth files",
                file.display()
            )),
            Ok(None) => found
                .notes
                .push(format!("{} has no entry for {registry}", file.display())),
            Err(why) => found.notes.push(format!("{} not used: {why}", file.display())),
        }
    }
    found
}

enum Entry {
    Basic(String, String),
    Helper(String),
}

/// The `auths` entry for `registry` in one docker/podman auth file.
fn read_entry(path: &Path, registry: &str) -> Result<Option<Entry>, String> {
    let meta = std::fs::metadata(path).map_err(|e| e.to_string())?;
    if meta.len() > 1 << 20 {
        return Err("larger than 1 MiB".into());
    }
    let text = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
    let v: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| format!("not JSON ({e})"))?;
    let wanted = [registry, aliases(registry)];
    let entry = v["auths"].as_object().and_then(|auths| {
        auths
            .iter()
            .find(|(k, _)| wanted.contains(&registry_of_key(k)))
            .map(|(_, e)| e.clone())
    });
    if let Some(e) = &entry {
        if let Some(auth) = e["auth"].as_str().filter(|a| !a.is_empty()) {
            let raw = base64::engine::general_purpose::STANDARD
                .decode(auth.trim())
                .map_err(|_| format!("its `auth` for {registry} is not base64"))?;
            let raw = String::from_utf8(raw)
                .map_err(|_| format!("its `auth` for {registry} is not UTF-8"))?;
            let (user, password) = raw
                .split_once(':')
                .ok_or_else(|| format!("its `auth` for {registry} is not USER:PASSWORD"))?;
            return Ok(Some(Entry::Basic(user.into(), password.into())));
        }
        if let (Some(u), Some(p)) = (e["username"].as_str(), e["password"].as_str()) {
            return Ok(Some(Entry::Basic(u.into(), p.into())));
        }
    }
    if let Some(h) = wanted
        .iter()
        .find_map(|r| v["credHelpers"][*r].as_str())
        .or_else(|| v["credsStore"].as_str())
    {
        return Ok(Some(Entry::Helper(h.to_string())));
    }
    if entry.is_some() {
        return Err(format!("its entry for {registry} has no `auth`"));
    }
    Ok(None)
}

/// Docker Hub's other names.
fn aliases(registry: &str) -> &str {
    match registry {
        "docker.io" | "registry-1.docker.io" => "index.docker.io",
        other => other,
    }
}

/// `https://index.docker.io/v1/` → `index.docker.io`; `host:5000/repo` → `host:5000`.
fn registry_of_key(key: &str) -> &str {
    let k = key
        .strip_prefix("https://")
        .or_else(|| key.strip_prefix("http://"))
        .unwrap_or(key);
    k.split('/').next().unwrap_or(k)
}

/// A parsed `WWW-Authenticate` challenge.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Challenge {
    /// `Bearer realm=…,service=…,scope=…`: get a token from the realm.
    Bearer {
        /// The token endpoint.
        realm: String,
        /// The `service` parameter, if given.
        service: Option<String>,
        /// The `scope` parameter, if given.
        scope: Option<String>,
    },
    /// `Basic realm=…`: send the credentials themselves.
    Basic,
}

/// Parse one `WWW-Authenticate` header value.
pub fn parse_challenge(value: &str) -> Option<Challenge> {
    let value = value.trim();
    let (scheme, params) = value.split_once(' ').unwrap_or((value, ""));
    if scheme.eq_ignore_ascii_case("basic") {
        return Some(Challenge::Basic);
    }
    if !scheme.eq_ignore_ascii_case("bearer") {
        return None;
    }
    let mut realm = None;
    let mut service = None;
    let mut scope = None;
    let mut rest = params.trim();
    while !rest.is_empty() {
        let (key, after) = rest.split_once('=')?;
        let key = key
            .trim()
            .trim_start_matches(',')
            .trim()
            .to_ascii_lowercase();
        let after = after.trim_start();
        let (val, next) = if let Some(q) = after.strip_prefix('"') {
            let end = q.find('"')?;
            (q[..end].to_string(), &q[end + 1..])
        } else {
            let end = after.find(',').unwrap_or(after.len());
            (after[..end].trim().to_string(), &after[end..])
        };
        match key.as_str() {
            "realm" => realm = Some(val),
            "service" => service = Some(val),
            "scope" => scope = Some(val),
            _ => {}
        }
        rest = next.trim_start().trim_start_matches(',').trim_start();
    }
    Some(Challenge::Bearer {
        realm: realm?,
        service,
        scope,
    })
}

#[cfg(test)]
#[path = "auth_tests.rs"]
mod tests;
