//! Which `Host` and `Origin` headers a request may carry: the loopback names with the bound
//! port, plus the names allowed for remote access.

/// The `Host` and `Origin` values a request may carry.
#[derive(Clone, Debug)]
pub struct Allowlist {
    hosts: Vec<String>,
    origins: Vec<String>,
}

impl Allowlist {
    /// Loopback names with `port`, plus `extra` names (`name` or `name:port`).
    pub fn new(port: u16, extra: &[String]) -> Self {
        let mut hosts: Vec<String> = ["localhost", "127.0.0.1", "[::1]"]
            .iter()
            .map(|h| format!("{h}:{port}"))
            .collect();
        for name in extra {
            let name = name.trim().to_ascii_lowercase();
            if name.is_empty() {
                continue;
            }
            let has_port = name.rsplit_once(':').is_some_and(|(h, p)| {
                !h.is_empty() && !h.ends_with(':') && p.parse::<u16>().is_ok()
            }) && !(name.starts_with('[') && name.ends_with(']'));
            hosts.push(if has_port {
                name
            } else {
                format!("{name}:{port}")
            });
        }
        hosts.sort();
        hosts.dedup();
        let origins = hosts
            .iter()
            .flat_map(|h| [format!("http://{h}"), format!("https://{h}")])
            .collect();
        Allowlist { hosts, origins }
    }

    /// The accepted `Host` values.
    pub fn hosts(&self) -> &[String] {
        &self.hosts
    }

    /// Whether a request with these `Host` and `Origin` headers may pass.
    pub fn allows(&self, host: Option<&str>, origin: Option<&str>) -> bool {
        let Some(host) = host else { return false };
        let host = host.trim().to_ascii_lowercase();
        if !self.hosts.contains(&host) {
            return false;
        }
        match origin {
            None => true,
            Some(o) => {
                let o = o.trim().trim_end_matches('/').to_ascii_lowercase();
                self.origins.contains(&o)
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
#[path = "allowlist_tests.rs"]
mod tests;
