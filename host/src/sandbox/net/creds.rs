//! Credential brokering: tools hold a placeholder, the host puts the real value in.
//!
//! A policy's `[[credentials]]` entry names a secret's source (a variable of the host process
//! or a file outside the workspace), the hosts it may be sent to, and optionally a header the
//! host adds to every request to those hosts. A tool or a command sees only the placeholder
//! `TOOLGATE_CRED_<name>_PLACEHOLDER`. On the way out (`wasi:http` for `fetch` and plugins, the
//! egress proxy's plain HTTP for shell commands) the host:
//! - replaces the placeholder in request headers with the real value when the destination is
//!   one the credential is bound to;
//! - refuses the request, recorded as a leak attempt, when a placeholder goes anywhere else, or
//!   sits in the URL (credentials travel in headers only);
//! - adds the credential's header (`Authorization: Bearer {}`) to requests to its hosts that do
//!   not carry that header already.
//!
//! The real value is never given to a guest or a command. Every answer from a bound host is
//! scrubbed of every form of the value on its way back ([`super::scrub`]: in the egress proxy
//! before the command reads it, in the host's HTTP client before the guest does), [`scrub`]
//! takes it out of any text again before it reaches an observation or a saved output, and
//! [`register`] makes the audit take it out of everything it stores.

use super::HostPattern;
use std::sync::Arc;

/// One credential as the host holds it.
#[derive(Clone)]
pub struct Credential {
    /// The name in the policy (letters, digits, `_`, `-`).
    pub name: String,
    /// The real value (`Err`: why there is none, e.g. the variable is not set).
    pub value: Result<String, String>,
    /// The destinations it may be sent to.
    pub hosts: Vec<HostPattern>,
    /// A header to add to requests to those hosts: its name and a template with `{}`.
    pub header: Option<(String, String)>,
    /// The variable commands and plugins see holding the placeholder (`None`: none).
    pub env: Option<String>,
}

impl std::fmt::Debug for Credential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the value.
        f.debug_struct("Credential")
            .field("name", &self.name)
            .field("has_value", &self.value.is_ok())
            .field("hosts", &self.hosts)
            .field("header", &self.header.as_ref().map(|(n, _)| n))
            .finish()
    }
}

impl Credential {
    /// What a tool sees instead of the value.
    pub fn placeholder(&self) -> String {
        placeholder(&self.name)
    }

    fn bound_to(&self, scheme: &str, host: &str, port: u16) -> bool {
        self.hosts.iter().any(|p| p.matches(scheme, host, port))
    }

    fn bound_list(&self) -> String {
        self.hosts
            .iter()
            .map(|h| format!("`{h}`"))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// The placeholder of the credential `name`.
pub fn placeholder(name: &str) -> String {
    format!("TOOLGATE_CRED_{name}_PLACEHOLDER")
}

/// Every credential of one gate.
pub type Credentials = Arc<[Credential]>;

/// Why a request was refused by the broker.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refused {
    /// In words, naming the credential, the host and what to do.
    pub why: String,
    /// A placeholder went to a host it is not bound to (audited as a leak attempt).
    pub leak: bool,
}

/// Put the credentials into a request to `scheme://host:port` with the request target
/// `target` (its path and query, or the whole URL) and `headers` (changed in place). Returns
/// the names of the credentials it used.
pub fn broker(
    creds: &[Credential],
    scheme: &str,
    host: &str,
    port: u16,
    target: &str,
    headers: &mut Vec<(String, String)>,
) -> Result<Vec<String>, Refused> {
    let mut used = Vec::new();
    for c in creds {
        let ph = c.placeholder();
        let bound = c.bound_to(scheme, host, port);
        if target.contains(&ph) {
            return Err(Refused {
                why: format!(
                    "the placeholder of credential `{}` is in the URL of a request to {host}; credentials travel in headers only, so this is refused as a leak attempt",
                    c.name
                ),
                leak: true,
            });
        }
        let carried = headers.iter().any(|(_, v)| v.contains(&ph));
        if carried && !bound {
            return Err(Refused {
                why: format!(
                    "the placeholder of credential `{}` was sent to {host}:{port}, which it is not bound to (it is bound to {}); refused as a leak attempt",
                    c.name,
                    c.bound_list()
                ),
                leak: true,
            });
        }
        if !bound {
            continue;
        }
        let adds = c
            .header
            .as_ref()
            .filter(|(n, _)| !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case(n)));
        if !carried && adds.is_none() {
            continue;
        }
        let value = c.value.as_ref().map_err(|why| Refused {
            why: format!(
                "credential `{}` has no value ({why}); nothing was sent to {host}",
                c.name
            ),
            leak: false,
        })?;
        for (_, v) in headers.iter_mut() {
            if v.contains(&ph) {
                *v = v.replace(&ph, value);
            }
        }
        if let Some((name, template)) = adds {
            headers.push((name.clone(), template.replace("{}", value)));
        }
        used.push(c.name.clone());
    }
    Ok(used)
}

/// [`broker`] on an `http` request (`wasi:http`'s outgoing requests): the headers it changed
/// or added are set on `req`.
pub fn broker_request<B>(
    creds: &[Credential],
    scheme: &str,
    host: &str,
    port: u16,
    req: &mut http::Request<B>,
) -> Result<Vec<String>, Refused> {
    let target = req.uri().to_string();
    let mut headers: Vec<(String, String)> = req
        .headers()
        .iter()
        .filter_map(|(k, v)| Some((k.as_str().to_string(), v.to_str().ok()?.to_string())))
        .collect();
    let before = headers.clone();
    let used = broker(creds, scheme, host, port, &target, &mut headers)?;
    if headers != before {
        let changed: Vec<String> = headers
            .iter()
            .filter(|h| !before.contains(h))
            .map(|(k, _)| k.to_ascii_lowercase())
            .collect();
        let map = req.headers_mut();
        for name in &changed {
            map.remove(name.as_str());
        }
        for (k, v) in headers
            .iter()
            .filter(|(k, _)| changed.contains(&k.to_ascii_lowercase()))
        {
            let (Ok(name), Ok(value)) = (
                http::header::HeaderName::from_bytes(k.as_bytes()),
                http::header::HeaderValue::from_str(v),
            ) else {
                return Err(Refused {
                    why: format!("the header `{k}` with a credential in it is not a valid header"),
                    leak: false,
                });
            };
            map.append(name, value);
        }
    }
    Ok(used)
}

/// Remember `creds`' values so the audit takes them out of everything it stores.
pub fn register(creds: &[Credential]) {
    for c in creds {
        if let Ok(v) = &c.value {
            crate::state::secrets::register(v, &c.placeholder());
        }
    }
}

#[cfg(test)]
#[path = "creds_tests.rs"]
mod tests;
